#pragma once
/// @file lease_keeper.h
/// Keeps a held lease renewed from the caller's own event loop: no thread,
/// and (for a lease with the non-blocking face, see lease.h) no blocking.
///
///   LeaseKeeper keeper(lock);               // any Lease, already acquired
///   if (!keeper.start().ok()) ...
///   for (;;) {
///     pollfd fds[1 + kMaxWaitFds] = {{my_fd, POLLIN, 0}};
///     const size_t n = 1 + keeper.wait_fds(fds + 1, kMaxWaitFds);
///     poll(fds, n, keeper.next_deadline().poll_timeout_ms(clock));
///     if (keeper.step() == LeaseState::kLost) { stop touching the device; }
///     ...
///   }
///
/// The keeper renews about every TTL/3 (renew(): reset to the full TTL,
/// owner-checked on the server). It stops at the first not-owner reply and
/// never re-creates a lost lease. It reports kLost as soon as the local
/// validity (lease.remaining()) runs out without a successful renewal, not
/// only after a failed one: next_deadline() includes the end of validity,
/// so a poll loop wakes up in time to stop before another holder can start.
///
/// A lease whose nonblocking() is true (Lock, FairLock, ReentrantLock and Permit on
/// a plain Connection, a Sentinel or a Cluster; QuorumLock) is renewed
/// without blocking: step() starts the renewal (start_renew()) and later calls advance it
/// (wait_fds() are its sockets, next_deadline() its deadline), so a stalled, paused or partitioned
/// server never holds up the loop. A renewal still out at the keeper's end is given up there
/// (cancel()) and the loss reported, on the loop's clock. Such a renewal can still start as late as
/// that end; the renew budget (below) only makes the keeper renew early enough that one timing out
/// leaves room for another.
///
/// On other leases (your own, or one whose back end is not set up) a renewal
/// blocks the caller for up to the lease's renew_budget() (the back end's
/// command timeout), so the keeper starts one only while one that takes
/// the whole budget still ends before the validity does (minus
/// KeeperOptions::lose_before). It never waits for the lease to cap the
/// renewal itself.
///
/// Either way start() refuses (kInvalidArgument) a lease whose validity
/// cannot hold even one renewal's budget: with the default command_timeout
/// (2 s) that is a TTL up to about 2.1 s. A shorter command_timeout (e.g.
/// TTL/4) leaves room for retries after a lost reply.
///
/// Works with any Lease (Lock, QuorumLock, ReentrantLock, Permit): one
/// virtual call per renewal or step, no template, no std::function and no
/// heap.

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/lease.h"
#include "edgelock/status.h"

namespace edgelock {

struct KeeperOptions {
  /// Time between renewals; 0 = a third of the validity a renewal gives
  /// (about TTL/3), measured again after every renewal.
  Nanos renew_every{0};
  /// Delay before retrying a renewal that failed for a transient reason
  /// (timeout, I/O, server busy); 0 = a quarter of the validity left.
  Nanos retry_every{0};
  /// Report kLost this long before the local validity ends (0 = at its
  /// end), e.g. to leave time to stop a child process before another
  /// holder can start. Every interval above counts from this earlier end.
  Nanos lose_before{0};
  /// The longest one renewal can take (block, for a lease without the
  /// non-blocking face); 0 = the lease's renew_budget().
  Nanos renew_budget{0};
};

enum class LeaseState : uint8_t {
  kIdle,     ///< Not started, or stopped by the caller.
  kKeeping,  ///< Held and being renewed.
  kLost,     ///< Lost: not-owner reply, or validity ran out. Final.
};

/// Counters for logs and demos (fixed size, no heap).
struct KeeperStats {
  uint32_t renewals = 0;  ///< Successful renewals.
  uint32_t failures = 0;  ///< Renewals that failed transiently.
};

class LeaseKeeper {
 public:
  /// Keeps `lease` alive, measuring time on its clock(). It must outlive
  /// the keeper.
  explicit LeaseKeeper(Lease& lease, const KeeperOptions& options = {})
      : lease_(&lease), options_(options) {}
  /// Cancels a renewal in flight, as stop(): the lease must outlive it.
  ~LeaseKeeper() { stop(); }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// Starts keeping a lease the caller holds now. No I/O.
  /// Errors: kNotHeld (no validity left), kInvalidArgument (negative
  /// intervals, or a validity left that cannot hold one renewal:
  /// lose_before + renew budget >= remaining()).
  Status start();
  /// Stops renewing (does not release); a renewal in flight is given up
  /// (the lease's cancel(): its validity is then the lesser of before and
  /// what the renewal may have set). State becomes kIdle unless lost.
  void stop();

  /// When step() next has work: the next renewal, the renewal in
  /// flight's own deadline, or the end of the local validity (minus
  /// lose_before), whichever is first. While a renewal is out it also
  /// comes back 1, 2, 4, ... ms after its start, then every 50 ms, so a
  /// loop that honours only this (and never watches wait_fds()) still
  /// reads the reply soon after it comes, without blocking. Never while
  /// not keeping.
  Deadline next_deadline() const;
  /// The descriptors a renewal in flight waits on (fd and poll events)
  /// into out[0, cap); 0 when none is. Poll them with your own and call
  /// step() when one is ready or next_deadline() has passed.
  size_t wait_fds(pollfd* out, size_t cap) const;
  /// Does any work that is due; call it when next_deadline() has passed or
  /// a descriptor of wait_fds() is ready (calling it early is harmless).
  /// Returns the state. On a lease with the non-blocking face it never
  /// blocks: it starts, steps or ends a renewal. On other leases a renewal
  /// blocks for at most the renew budget and is only started if it then
  /// still ends before the validity (minus lose_before): step() never
  /// returns later than that end plus the loop's own lateness. kLost is
  /// reported by that end at the latest (also when a renewal succeeds too
  /// late or leaves no more than lose_before of validity).
  LeaseState step();
  /// True while a renewal is in flight (non-blocking leases).
  bool renewing() const { return renewing_; }

  LeaseState state() const { return state_; }
  bool lost() const { return state_ == LeaseState::kLost; }
  /// Why the lease was lost (kNotOwner, or kExpired when the validity ran
  /// out), or the last transient renewal error while keeping. The lease's
  /// last_error() has the text.
  Status last_status() const { return last_status_; }
  /// The loss as a sentence for a log line ("" while not lost): the key
  /// gone or taken over (kNotOwner), or no renewal succeeding before the
  /// validity ran out (kExpired). Static text, never null.
  const char* loss_text() const;
  /// When the loss was detected, on the lease's clock (TimePoint() if not
  /// lost).
  TimePoint lost_at() const { return lost_at_; }
  const KeeperStats& stats() const { return stats_; }
  /// The renew budget in use (fixed by start(); 0 = unknown).
  Nanos renew_budget() const { return budget_; }

 private:
  void lose(Status why, TimePoint now);
  LeaseState renewed(Status s, TimePoint now);
  void cancel_renewal();
  Nanos renew_delay() const;
  void schedule(TimePoint now, Nanos delay);
  // Validity left before the keeper's own end (may be <= 0).
  Nanos usable_left() const { return lease_->remaining() - options_.lose_before; }

  Lease* lease_;
  KeeperOptions options_;
  LeaseState state_ = LeaseState::kIdle;
  Nanos budget_{0};            // longest renewal, fixed at start()
  bool renewing_ = false;      // a non-blocking renewal is in flight
  TimePoint next_renew_at_{};  // kNoRenewal: none fits before the end
  TimePoint keep_until_{};     // the keeper's end when the renewal started
  TimePoint renew_started_{};  // when the renewal in flight started
  TimePoint lost_at_{};
  Status last_status_;
  KeeperStats stats_;
};

}  // namespace edgelock
