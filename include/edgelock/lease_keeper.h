#pragma once
/// @file lease_keeper.h
/// Keeps a held lease renewed from the caller's own event loop: no thread.
///
///   LeaseKeeper keeper(lock);               // any Lease, already acquired
///   if (!keeper.start().ok()) ...
///   for (;;) {
///     poll(fds, n, keeper.next_deadline().poll_timeout_ms(clock));
///     if (keeper.service() == LeaseState::kLost) { stop touching the device; }
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
/// Bounded by the validity, whatever the server does: a renewal blocks the
/// caller for up to the lease's renew_budget() (Lock, ReentrantLock and
/// Permit: the back end's command timeout; QuorumLock: its server_timeout),
/// so the keeper starts a renewal only while one that takes the whole
/// budget still ends before the validity does (minus
/// KeeperOptions::lose_before). It never waits for the lease to cap the
/// renewal itself. With the default command_timeout (2 s) that works for a
/// TTL above about 2.1 s; start() refuses (kInvalidArgument) a lease whose
/// validity cannot hold even one renewal. A shorter command_timeout (e.g.
/// TTL/4) leaves room for retries after a lost reply.
///
/// Works with any Lease (Lock, QuorumLock, ReentrantLock, Permit): one
/// virtual call per renewal, no template, no std::function and no heap.

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
  /// The longest one renewal can block; 0 = the lease's renew_budget().
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
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// Starts keeping a lease the caller holds now. No I/O.
  /// Errors: kNotHeld (no validity left), kInvalidArgument (negative
  /// intervals, or a validity left that cannot hold one renewal:
  /// lose_before + renew budget >= remaining()).
  Status start();
  /// Stops renewing (does not release). State becomes kIdle unless lost.
  void stop();

  /// When service() next has work: the next renewal or the end of the
  /// local validity (minus lose_before), whichever is first. Never while
  /// not keeping.
  Deadline next_deadline() const;
  /// Does any work that is due; call it when next_deadline() has passed
  /// (calling it early is harmless). Returns the state. A renewal blocks
  /// for at most the renew budget and is only started if it then still
  /// ends before the validity (minus lose_before): service() never returns
  /// later than that end plus the loop's own lateness. kLost is reported
  /// by that end at the latest (also when a renewal succeeds too late or
  /// leaves no more than lose_before of validity).
  LeaseState service();

  LeaseState state() const { return state_; }
  bool lost() const { return state_ == LeaseState::kLost; }
  /// Why the lease was lost (kNotOwner, or kExpired when the validity ran
  /// out), or the last transient renewal error while keeping. The lease's
  /// last_error() has the text.
  Status last_status() const { return last_status_; }
  /// When the loss was detected, on the lease's clock (TimePoint() if not
  /// lost).
  TimePoint lost_at() const { return lost_at_; }
  const KeeperStats& stats() const { return stats_; }
  /// The renew budget in use (fixed by start(); 0 = unknown).
  Nanos renew_budget() const { return budget_; }

 private:
  void lose(Status why, TimePoint now);
  Nanos renew_delay() const;
  void schedule(TimePoint now, Nanos delay);
  // Validity left before the keeper's own end (may be <= 0).
  Nanos usable_left() const { return lease_->remaining() - options_.lose_before; }

  Lease* lease_;
  KeeperOptions options_;
  LeaseState state_ = LeaseState::kIdle;
  Nanos budget_{0};        // longest renewal, fixed at start()
  TimePoint next_renew_at_{};  // kNoRenewal: none fits before the end
  TimePoint lost_at_{};
  Status last_status_;
  KeeperStats stats_;
};

}  // namespace edgelock
