#pragma once
/// @file lease.h
/// What every held lease offers, whatever granted it: Lock, FairLock,
/// QuorumLock, ReentrantLock and a semaphore's Permit implement it, and LockGuard,
/// LeaseKeeper and the command-line tool work on any of them through it.
/// A plain interface (virtual calls, no heap, no RTTI); the owner keeps the
/// concrete object, which is never deleted through a Lease.
///
/// Non-blocking face (docs/nonblocking.md): a lease whose nonblocking() is
/// true also renews and releases as a start call plus step() calls, driven
/// by the caller's own loop (the shape of c-ares or hiredis's async API,
/// without callbacks). Only one operation is in flight per handle.
///
///   Status s = lease.start_renew();
///   while (s.code() == ErrorCode::kInProgress) {
///     pollfd fds[kMaxWaitFds];
///     const size_t n = lease.wait_fds(fds, kMaxWaitFds);
///     poll(fds, n, lease.next_deadline().poll_timeout_ms(lease.clock()));
///     s = lease.step();  // harmless when nothing is ready
///   }
///
/// The defaults below are a lease without that face (nonblocking() false):
/// LeaseKeeper then calls renew(), which blocks.

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {

/// How extend() sets the new TTL.
enum class ExtendMode : uint8_t {
  kAdd,      ///< New TTL = what is left + ttl (redis-py's default).
  kReplace,  ///< New TTL = ttl.
};

/// Result of status(): what the server says about a key, whoever holds it.
struct KeyStatus {
  bool held = false;
  /// False if held without expiry (then ttl is 0).
  bool expires = false;
  /// The holder's TTL left (whole ms, as the server counts); 0 if not held.
  Millis ttl{0};
};

/// Most descriptors one operation waits on at once (a quorum lock: one per
/// server).
constexpr size_t kMaxWaitFds = kMaxQuorumServers;

class Lease {
 public:
  /// Resets the lease to its full configured TTL (owner-checked on the
  /// server). Waits no later than the end of the current validity: a
  /// renewal that does not come back in time is a loss. OK means held with
  /// validity > 0 left. Errors: the implementation's extend()'s (kNotHeld,
  /// kNotOwner, kExpired and the back end's errors; see each type).
  virtual Status renew() = 0;
  /// Gives the lease back (owner-checked). Errors: the implementation's
  /// release()'s (kNotHeld, kNotOwner, ...).
  virtual Status release() = 0;
  /// Conservative validity left (0 if not held): the server holds the lease
  /// at least this long, less the drift allowance.
  virtual Nanos remaining() const = 0;
  /// True while remaining() > 0.
  bool held() const { return remaining() > Nanos::zero(); }
  /// The longest one renew() can block (the back end's command timeout, or
  /// a quorum round's budget); 0 = unknown.
  virtual Nanos renew_budget() const = 0;
  /// The last error's text (for logs; never null, "" if none): for a
  /// lock, why init() refused its arguments, else its back end's last error.
  virtual const char* last_error() const = 0;
  /// The time source remaining() is measured on.
  virtual Clock& clock() const = 0;
  virtual Bytes key() const = 0;
  /// What identifies this holder on the server (lock token, permit id,
  /// reentrant owner id).
  virtual Bytes token() const = 0;
  /// Fencing token of the current grant (0 if none or not fenced).
  virtual uint64_t fence() const = 0;

  // --- Non-blocking face (see the file comment).
  /// True if start_renew()/start_release()/step() work here: a Lock,
  /// FairLock, ReentrantLock or Permit over a plain Connection or a
  /// Sentinel or Cluster that is set up; or a QuorumLock.
  virtual bool nonblocking() const { return false; }
  /// Starts renew() and returns kInProgress, or its final status if it
  /// ended at once. Errors: as renew(); kInvalidArgument also when an
  /// operation is in flight or nonblocking() is false.
  virtual Status start_renew() { return ErrorCode::kInvalidArgument; }
  /// Starts release(), as start_renew(). Errors: as release(), and
  /// kInvalidArgument as start_renew().
  virtual Status start_release() { return ErrorCode::kInvalidArgument; }
  /// Moves the operation in flight without blocking: kInProgress while it
  /// is not done, then its final status (what the blocking call returns).
  /// Errors: the operation's; kInvalidArgument when none is in flight.
  virtual Status step() { return ErrorCode::kInvalidArgument; }
  /// True while an operation is in flight.
  virtual bool in_progress() const { return false; }
  /// Writes the descriptors the operation in flight waits on (fd and poll
  /// events; revents 0) to out[0, cap) and returns how many: at most 1
  /// for a single-key lease, one per server for a QuorumLock (0: none,
  /// e.g. a backoff pause: only next_deadline() counts).
  virtual size_t wait_fds(pollfd* out, size_t cap) const {
    (void)out;
    (void)cap;
    return 0;
  }
  /// When step() must be called at the latest, whatever the descriptors
  /// do (a request's deadline, the end of a pause; already passed when
  /// work is waiting); never() when idle.
  virtual Deadline next_deadline() const { return Deadline::never(); }
  /// Gives the operation in flight up at once, without I/O: its
  /// connections are closed (the next operation reconnects) and its
  /// outcome counts as unknown, as when its deadline passes (kTimeout): a
  /// cancelled acquire keeps its token for release(), a cancelled renewal
  /// leaves the lesser validity. No-op when idle.
  virtual void cancel() {}

 protected:
  Lease() = default;
  Lease(const Lease&) = default;
  Lease& operator=(const Lease&) = default;
  // Not deleted through this interface: the owner holds the concrete type.
  ~Lease() = default;
};

}  // namespace edgelock
