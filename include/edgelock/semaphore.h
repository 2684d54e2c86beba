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

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/connection.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/metrics.h"
#include "edgelock/script.h"
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

class Semaphore;

/// One permit, owned by the caller (several may be held at once), bound to
/// the semaphore that granted it, which must outlive it. Its id, token(), is all
/// another process needs to release it (Semaphore::release_id()).
///
/// Two things are tracked apart. A non-empty token() means the server MAY hold
/// the permit (a grant, extend or release whose outcome is unknown keeps
/// it): release() cleans it up. held() (validity left) means the permit IS
/// held for at least remaining() (less the drift allowance): only then may
/// the caller act on it.
class Permit final : public Lease {
 public:
  Permit() = default;

  /// Sets the permit's lease to `ttl` from now (server time). Waits no later
  /// than the end of the permit's validity (nor the command timeout): a
  /// renewal that does not come back in time is a loss. OK only if the
  /// permit has validity left afterwards.
  /// Errors: kInvalidArgument, kNotHeld (empty id), kNotOwner (expired:
  /// gone; the id is cleared), kExpired (the validity ended before the
  /// answer, or `ttl` is within the drift allowance: no longer claimed, id
  /// kept), kProtocol, Connection::command()'s (kNoQuorum on Sentinel or
  /// Cluster with WAIT); kNotHeld also once a release of this id was sent.
  /// The server's expiry becomes max(old, now + ttl): never shorter, as a
  /// request given up on may run after a later one (docs/late-requests.md).
  /// When the outcome is unknown the validity becomes the lesser of the
  /// old one and start + ttl - drift.
  Status extend(Millis ttl);
  /// extend(the semaphore's options().ttl). Errors: as extend().
  Status renew() override;
  /// Returns the permit. Errors: kNotHeld (empty id), kNotOwner (it had
  /// expired: nothing released; the id is cleared), kProtocol,
  /// Connection::command()'s. After kProtocol, kTimeout, kIo and the other
  /// errors that leave the outcome unknown, the permit is no longer claimed
  /// (remaining() is 0) but keeps its id: call release() again.
  Status release() override;

  // --- Non-blocking face (as Lock's; the permit's semaphore does the
  // work, one operation at a time for all its permits; plain Connection,
  // Sentinel or Cluster). The permit must outlive the
  // operation.
  /// extend(ttl). Errors: as extend(); kInvalidArgument also when the
  /// semaphore has an operation in flight.
  Status start_extend(Millis ttl);
  /// renew(). Errors: as start_extend().
  Status start_renew() override;
  /// release(). Errors: as release(); kInvalidArgument as start_extend().
  Status start_release() override;
  /// Moves this permit's operation in flight (Semaphore::step()). Errors:
  /// the operation's; kInvalidArgument when this permit has none.
  Status step() override;
  bool nonblocking() const override;
  /// True while an operation of this permit is in flight.
  bool in_progress() const override;
  size_t wait_fds(pollfd* out, size_t cap) const override;
  Deadline next_deadline() const override;
  void cancel() override;

  /// Conservative validity left (0 if none or not claimed).
  Nanos remaining() const override;
  /// The permit id (empty: no permit, nothing to clean up).
  Bytes token() const override { return Bytes(id_, id_len_); }
  /// The semaphore's key (empty while unbound).
  Bytes key() const override;
  /// Permits carry no fencing token: 0.
  uint64_t fence() const override { return 0; }
  const char* last_error() const override;
  Clock& clock() const override;

 private:
  // Lease, for the keeper (through Lease&): the longest one renew() blocks.
  Nanos renew_budget() const override;

  friend class Semaphore;
  void unclaim() {
    granted_ = false;
    valid_until_ = TimePoint();
  }
  // Nothing left to claim or clean up (still bound to its semaphore).
  void clear() {
    unclaim();
    id_len_ = 0;
    retired_ = false;
  }

  Semaphore* sem_ = nullptr;
  char id_[kMaxTokenLen] = {};
  size_t id_len_ = 0;
  TimePoint valid_until_{};  // local, conservative end of the lease
  bool granted_ = false;
  bool retired_ = false;  // a release of this id was sent: never granted under it again
};

class Semaphore {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock; it
  /// must outlive the semaphore and its permits.
  explicit Semaphore(Backend& backend) : core_(backend) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  /// Sets key and options. No I/O. Errors: kInvalidArgument, kRandomFailed.
  Status init(Bytes key, const SemaphoreOptions& options = {});

  /// One attempt with a new random permit id written to *permit, which is
  /// bound to this semaphore (whatever *permit held is overwritten:
  /// release() it first).
  /// Errors: kBusy (N in use; busy_ttl() says when the first expires),
  /// kExpired (granted too late to use: handed back; the id is kept, since
  /// the hand-back itself may have failed), kInvalidArgument (not init()ed,
  /// null permit), kRandomFailed, kProtocol, and Connection::command()'s
  /// (on Sentinel or Cluster Backend::eval()'s: kNoQuorum, replicas did not
  /// confirm the grant; it was handed back).
  /// After any error but kBusy, kInvalidArgument and kRandomFailed the
  /// permit may be held on the server: *permit keeps its id, so
  /// permit->release() cleans up (else it expires after its TTL).
  Status try_acquire(Permit* permit);
  /// Tries until `wait` has passed (kForever or negative = forever), backing off but
  /// never sleeping past the first permit's expiry. Lost replies and late
  /// grants are safe: retries reuse the permit id and the script recognises
  /// it. Errors: kBusy at the end, the last connection error or kExpired,
  /// or try_acquire()'s non-retryable ones; as with try_acquire(), call
  /// permit->release() after a failure to remove a grant that may have
  /// landed.
  Status acquire(Permit* permit, Nanos wait);
  /// Returns a permit by id alone (e.g. from another process or the CLI).
  /// Errors: kNotHeld (empty id), kNotOwner (it had expired or was
  /// unknown), kInvalidArgument (id too long, not init()ed), kProtocol,
  /// Connection::command()'s.
  Status release_id(Bytes id);
  /// Permits in use now (expired ones dropped first).
  /// Errors: kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Result<uint32_t> in_use();

  // --- Non-blocking face (docs/nonblocking.md; as Lock's): plain
  // Connection, Sentinel or Cluster,
  // one operation at a time for the semaphore and all its permits;
  // *permit must outlive it.
  /// try_acquire(permit). Errors: as try_acquire(); kInvalidArgument also
  /// when an operation is in flight.
  Status start_try_acquire(Permit* permit);
  /// acquire(permit, wait). Errors: as start_try_acquire().
  Status start_acquire(Permit* permit, Nanos wait);
  /// in_use(): once step() ends with ok, *out holds the count (*out must
  /// live until then). Errors: as in_use(); kInvalidArgument also for a
  /// null `out`.
  Status start_in_use(uint32_t* out) { return begin_count(out, true); }
  /// Moves the operation in flight (whichever permit it is for): kInProgress
  /// until done, then its result. Errors: the operation's;
  /// kInvalidArgument when none is in flight.
  Status step();
  bool in_progress() const { return core_.op() != 0; }
  size_t wait_fds(pollfd* out, size_t cap) const { return core_.wait_fds(out, cap); }
  Deadline next_deadline() const { return core_.next_deadline(); }
  /// Gives the operation in flight up (see Lease::cancel()).
  void cancel() { core_.cancel(&Semaphore::step_of, this); }

  /// Until the first permit expires, seen by the last busy attempt.
  Millis busy_ttl() const { return core_.busy_ttl(); }
  Bytes key() const { return core_.key(); }
  const char* last_error() const { return core_.last_error(); }

 private:
  friend class Permit;  // renews for options_.ttl
  // The request in flight.
  enum class Req : uint8_t { kAttempt, kHandBack, kRelease, kExtend, kCount };
  static Status step_of(void* self) { return static_cast<Semaphore*>(self)->step(); }
  static Status again_of(void* self, Deadline deadline);
  static Status reply_of(void* self, const Result<const Reply*>& r);
  Status on_reply(const Result<const Reply*>& r);
  Status begin_try(Permit* permit, bool nonblocking);
  Status begin_acquire(Permit* permit, Nanos wait, bool nonblocking);
  Status first_attempt(Permit* permit);
  Status start_attempt(Deadline deadline);
  Status on_attempt(const Result<const Reply*>& r);
  Status hand_back(Status then, bool noted);
  Status attempt_done(Status s);
  Status begin_release(Permit* permit, Bytes id, bool nonblocking);
  Status release_request(Bytes id, Req req);
  Status on_release(const Result<const Reply*>& r);
  Status finish_release(Status s);
  Status release(Permit* permit);
  Status extend(Permit* permit, Millis ttl);
  Status begin_extend(Permit* permit, Millis ttl, bool nonblocking);
  Status extend_request(Millis ttl);
  Status on_extend(const Result<const Reply*>& r);
  Status begin_count(uint32_t* out, bool nonblocking);
  Status on_count(const Result<const Reply*>& r);

  detail::LeaseCore core_;
  detail::RequestWords<3, 2> words_;  // the request in flight's
  SemaphoreOptions options_;
  Permit* permit_ = nullptr;       // the operation's permit (none for release_id())
  uint32_t* count_out_ = nullptr;  // where an in_use() answer goes
  Req req_ = Req::kAttempt;
  bool hand_back_noted_ = false;
  Status last_;  // the attempt's result after a hand-back
  Millis ext_ttl_{0};
  TimePoint req_start_{};  // the attempt's or extend's request left after this
  TimePoint op_t0_{};      // when the release or extend was called (metrics)
};

}  // namespace edgelock
