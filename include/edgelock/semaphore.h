#pragma once
/// @file semaphore.h
/// A counting semaphore whose permits expire: "at most N gateways download
/// firmware at once", and a permit held by a crashed device comes back
/// after its TTL instead of never.
///
/// The server keeps a sorted set under the key: permit id -> expiry time in
/// ms on the SERVER's clock (redis.call('TIME') inside the script; Redis 7
/// replicates script effects, so this is allowed and replicas see plain
/// ZADDs). Each operation is one script that first drops expired permits,
/// so the count in use can never exceed N, whatever the races. The key
/// itself expires with its last permit. Every user of a key must pass the
/// same `permits` (N); it is not stored on the server.
///
/// Quorum variant: deliberately not provided, because it is unsound. With
/// N >= 2 permits on 3 servers, holders A {s1,s2}, B {s2,s3} and C {s1,s3}
/// each hold a majority while every server counts only 2: three holders of
/// two permits. Majorities intersect pairwise, which bounds a mutex (N = 1)
/// but not a count. For N = 1 use a QuorumLock.

#include <cstdint>

#include "edgelock/backoff.h"
#include "edgelock/bytes.h"
#include "edgelock/connection.h"
#include "edgelock/limits.h"
#include "edgelock/metrics.h"
#include "edgelock/random.h"
#include "edgelock/status.h"

namespace edgelock {

struct SemaphoreOptions {
  /// N: permits in use at most. 1 .. kMaxPermits.
  uint32_t permits = 1;
  /// Lease of each permit. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// As LockOptions::drift_factor. 0 .. 0.5.
  double drift_factor = 0.01;
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
};

/// Upper bound on N (the script's ZCARD is O(1), but keep it sane).
constexpr uint32_t kMaxPermits = 1u << 20;

/// One permit, owned by the caller (several may be held at once). Its id is
/// all another process needs to release or extend it.
///
/// Two things are tracked apart. A non-empty id means the server MAY hold
/// the permit (a grant, extend or release whose outcome is unknown keeps
/// it): release() cleans it up. `granted` with validity left means the
/// permit IS held for at least remaining() (less the drift allowance): only
/// then may the caller act on it.
struct Permit {
  char id[kMaxTokenLen] = {};
  size_t id_len = 0;
  TimePoint valid_until{};  ///< Local, conservative end of the lease.
  bool granted = false;
  Bytes id_bytes() const { return Bytes(id, id_len); }
};

class Semaphore {
 public:
  explicit Semaphore(Connection& conn) : conn_(&conn) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  /// Sets key and options. No I/O. Errors: kInvalidArgument, kRandomFailed.
  Status init(Bytes key, const SemaphoreOptions& options = {});

  /// One attempt with a new random permit id written to *permit (whatever
  /// *permit held is overwritten: release() it first).
  /// Errors: kBusy (N in use; busy_wait() says when the first expires),
  /// kExpired (granted too late to use: handed back; the id is kept, since
  /// the hand-back itself may have failed), kInvalidArgument (not init()ed,
  /// null permit), kRandomFailed, kProtocol, and Connection::command()'s.
  /// After any error but kBusy, kInvalidArgument and kRandomFailed the
  /// permit may be held on the server: *permit keeps its id, so
  /// release(*permit) cleans up (else it expires after its TTL).
  Status try_acquire(Permit* permit);
  /// Tries until `wait` has passed (kForever or negative = forever), backing off but
  /// never sleeping past the first permit's expiry. Lost replies and late
  /// grants are safe: retries reuse the permit id and the script recognises
  /// it. Errors: kBusy at the end, the last connection error or kExpired,
  /// or try_acquire()'s non-retryable ones; as with try_acquire(), call
  /// release(*permit) after a failure to remove a grant that may have landed.
  Status acquire(Permit* permit, Nanos wait);
  /// Returns the permit. Errors: kNotHeld (empty id), kNotOwner (it had
  /// expired: nothing released; *permit is cleared), kProtocol,
  /// Connection::command()'s. After kProtocol, kTimeout, kIo and the other
  /// errors that leave the outcome unknown, the permit is no longer claimed
  /// (remaining() is 0) but keeps its id: call release() again.
  Status release(Permit* permit);
  /// Returns a permit by id alone (e.g. from another process or the CLI).
  /// Errors: as release(), kInvalidArgument (id too long, not init()ed).
  Status release_id(Bytes id);
  /// Sets the permit's lease to `ttl` from now (server time). Waits no later
  /// than the end of the permit's validity (nor the command timeout): a
  /// renewal that does not come back in time is a loss. OK only if the
  /// permit has validity left afterwards.
  /// Errors: kInvalidArgument, kNotHeld (empty id), kNotOwner (expired:
  /// gone; *permit is cleared), kExpired (the validity ended before the
  /// answer, or `ttl` is within the drift allowance: no longer claimed, id
  /// kept), kProtocol, Connection::command()'s. When the outcome is unknown
  /// the validity becomes the lesser of the old one and what this request
  /// may have set (start + ttl - drift): a shortening extend is honoured.
  Status extend(Permit* permit, Millis ttl);
  /// Permits in use now (expired ones dropped first).
  /// Errors: kInvalidArgument (not init()ed), kProtocol,
  /// Connection::command()'s.
  Result<uint32_t> in_use();

  /// Conservative validity left on `permit` (0 if none or not claimed): the
  /// server holds it at least this long, less the drift allowance.
  Nanos remaining(const Permit& permit) const;
  /// Until the first permit expires, seen by the last busy attempt.
  Millis busy_wait() const { return busy_wait_; }
  Bytes key() const { return Bytes(key_, key_len_); }
  const SemaphoreOptions& options() const { return options_; }
  Connection& connection() const { return *conn_; }
  const char* connection_error() const { return conn_->last_error(); }
  const Metrics& metrics() const { return metrics_; }

 private:
  Status attempt(Permit* permit, Deadline deadline);
  Status send_acquire(Permit* permit, Deadline deadline);
  Status send_release(Bytes id);
  Status send_extend(Permit* permit, Millis ttl);
  Status noted(EventKind kind, TimePoint start, Status s);
  Deadline io_deadline() const;
  static void unclaim(Permit* permit);

  Connection* conn_;
  SemaphoreOptions options_;
  uint8_t key_[kMaxKeyLen] = {};
  size_t key_len_ = 0;
  Millis busy_wait_{0};
  Prng rng_;
  Backoff backoff_{Millis(2), Millis(250)};
  Metrics metrics_;
};

/// A permit bound to its semaphore, offering the reacquire()/remaining()
/// pair a lease keeper expects (lease_target(PermitLease&)). Both pointers
/// must outlive it.
struct PermitLease {
  Semaphore* semaphore = nullptr;
  Permit* permit = nullptr;
  /// extend(permit, options().ttl). Errors: as Semaphore::extend().
  Status reacquire() { return semaphore->extend(permit, semaphore->options().ttl); }
  Nanos remaining() const { return semaphore->remaining(*permit); }
};

}  // namespace edgelock
