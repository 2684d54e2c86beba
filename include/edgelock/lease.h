#pragma once
/// @file lease.h
/// What every held lease offers, whatever granted it: Lock, QuorumLock,
/// ReentrantLock and a semaphore's Permit implement it, and LockGuard,
/// LeaseKeeper and the command-line tool work on any of them through it.
/// A plain interface (virtual calls, no heap, no RTTI); the owner keeps the
/// concrete object, which is never deleted through a Lease.

#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/status.h"

namespace edgelock {

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
  /// The last error's text (for logs; never null, "" if none).
  virtual const char* last_error() const = 0;
  /// The time source remaining() is measured on.
  virtual Clock& clock() const = 0;
  virtual Bytes key() const = 0;
  /// What identifies this holder on the server (lock token, permit id,
  /// reentrant owner id).
  virtual Bytes token() const = 0;
  /// Fencing token of the current grant (0 if none or not fenced).
  virtual uint64_t fence() const = 0;

 protected:
  Lease() = default;
  Lease(const Lease&) = default;
  Lease& operator=(const Lease&) = default;
  // Not deleted through this interface: the owner holds the concrete type.
  ~Lease() = default;
};

}  // namespace edgelock
