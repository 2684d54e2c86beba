#pragma once
/// @file lease_keeper.h
/// Keeps a held lock renewed from the caller's own event loop: no thread.
///
///   LeaseKeeper keeper(lock);               // lock already acquired
///   if (!keeper.start().ok()) ...
///   for (;;) {
///     poll(fds, n, keeper.next_deadline().poll_timeout_ms(clock));
///     if (keeper.service() == LeaseState::kLost) { stop touching the device; }
///     ...
///   }
///
/// The keeper renews about every TTL/3 (reacquire(): reset to the full TTL,
/// owner-checked on the server). It stops at the first not-owner reply and
/// never re-creates a lost lock. It reports kLost as soon as the local
/// validity (lock.remaining()) runs out without a successful renewal, not
/// only after a failed one: next_deadline() includes the end of validity,
/// so a poll loop wakes up in time to stop before another holder can start.
///
/// Works with any lock type offering `Status reacquire()` and
/// `Nanos remaining() const` (Lock, QuorumLock): the lock is reached through
/// two plain function pointers, so there is no template bloat in the logic,
/// no std::function and no heap.

#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/lock.h"
#include "edgelock/status.h"

namespace edgelock {

/// A type-erased reference to a lock the keeper renews.
struct LeaseTarget {
  void* lock = nullptr;
  Status (*renew)(void* lock) = nullptr;
  Nanos (*remaining)(const void* lock) = nullptr;
};

/// Builds a LeaseTarget for any lock with reacquire() and remaining().
template <typename LockT>
LeaseTarget lease_target(LockT& lock) {
  LeaseTarget t;
  t.lock = &lock;
  t.renew = [](void* l) -> Status { return static_cast<LockT*>(l)->reacquire(); };
  t.remaining = [](const void* l) -> Nanos { return static_cast<const LockT*>(l)->remaining(); };
  return t;
}

struct KeeperOptions {
  /// Time between renewals; 0 = a third of the validity a renewal gives
  /// (about TTL/3), measured again after every renewal.
  Nanos renew_every = 0;
  /// Delay before retrying a renewal that failed for a transient reason
  /// (timeout, I/O, server busy); 0 = a quarter of the validity left.
  Nanos retry_every = 0;
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
  /// Keeps `target` alive, measuring time on `clock`. Both must outlive it.
  LeaseKeeper(const LeaseTarget& target, Clock& clock, const KeeperOptions& options = {})
      : target_(target), clock_(&clock), options_(options) {}
  /// Convenience for a single-server Lock (uses its connection's clock).
  explicit LeaseKeeper(Lock& lock, const KeeperOptions& options = {})
      : LeaseKeeper(lease_target(lock), lock.connection().clock(), options) {}
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// Starts keeping a lock the caller holds now. No I/O.
  /// Errors: kNotHeld (no validity left), kInvalidArgument (negative
  /// intervals, or an incomplete LeaseTarget).
  Status start();
  /// Stops renewing (does not release). State becomes kIdle unless lost.
  void stop();

  /// When service() next has work: the next renewal or the end of the
  /// local validity, whichever is first. Never while not keeping.
  Deadline next_deadline() const;
  /// Does any work that is due; call it when next_deadline() has passed
  /// (calling it early is harmless). A renewal blocks for at most the
  /// lock's command timeout: keep that below TTL/3. Returns the state.
  LeaseState service();

  LeaseState state() const { return state_; }
  bool lost() const { return state_ == LeaseState::kLost; }
  /// Why the lease was lost (kNotOwner, or kExpired when the validity ran
  /// out), or the last transient renewal error while keeping.
  Status last_error() const { return last_error_; }
  /// When the loss was detected, on the keeper's clock (0 if not lost).
  Nanos lost_at() const { return lost_at_; }
  const KeeperStats& stats() const { return stats_; }

 private:
  void lose(Status why, Nanos now);
  void schedule_after_renewal(Nanos now);
  Nanos validity_left() const { return target_.remaining(target_.lock); }

  LeaseTarget target_;
  Clock* clock_;
  KeeperOptions options_;
  LeaseState state_ = LeaseState::kIdle;
  Nanos next_renew_at_ = 0;
  Nanos lost_at_ = 0;
  Status last_error_;
  KeeperStats stats_;
};

}  // namespace edgelock
