#pragma once
// Internal: the one machine of the single-key leases (Lock, FairLock,
// ReentrantLock; src/lease/core_lease.cc). A lease adds its scripts, the
// requests that send them and the handlers of their replies; the step,
// the blocking calls as loops over it, release, extend, renew, the
// hand-back of a grant that cannot be used and the counting are here.
//
//   start_*() --> request --reply--> on_reply() --+--> end: the status
//                   ^   ^                         |
//                   |   +------ hand-back <-------+  (grant unusable)
//                   +---- pause <-- wait goes on <+  (busy, retryable)
//
// LeaseOp names the operation in flight (LeaseCore::op()); a lease's own
// Req names the request within it.

#include <cstddef>
#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// The operations of a single-key lease (LeaseCore::op()).
enum LeaseOp : uint8_t {
  kOpTry = 1,
  kOpAcquire,
  kOpRelease,
  kOpExtend,
  kOpLeave,
  kOpCheck,
  kOpStatus
};

/// The base of the single-key leases: the Lease calls they all answer
/// from their core and the machine's shared states, written once.
class CoreLease : public Lease {
 public:
  CoreLease(const CoreLease&) = delete;
  CoreLease& operator=(const CoreLease&) = delete;

  Status release() final { return drive(begin_release(false)); }
  Status start_release() final { return begin_release(true); }
  Status renew() final { return drive(begin_extend(lease_ttl(), ExtendMode::kReplace, false)); }
  Status start_renew() final { return begin_extend(lease_ttl(), ExtendMode::kReplace, true); }
  Status step() final;
  bool nonblocking() const final { return core_.steps(); }
  bool in_progress() const final { return core_.op() != 0; }
  size_t wait_fds(pollfd* out, size_t cap) const final { return core_.wait_fds(out, cap); }
  Deadline next_deadline() const final { return core_.next_deadline(); }
  void cancel() final { core_.cancel(&CoreLease::step_of, this); }
  Bytes key() const final { return core_.key(); }
  const char* last_error() const final { return core_.last_error(); }
  Clock& clock() const final { return core_.clock(); }
  uint64_t fence() const final { return fence_; }
  Bytes token() const final { return Bytes(token_, token_len_); }
  /// The holder's TTL the last busy attempt saw, at most kMaxTtl; 0 also
  /// for a holder without TTL.
  Millis busy_ttl() const { return core_.busy_ttl(); }
  /// Each lease overrides it; the default (no time left) keeps pure
  /// virtuals out of the vtable (see the hooks below).
  Nanos remaining() const override { return Nanos::zero(); }

 protected:
  explicit CoreLease(Backend& backend) : core_(backend) {}
  ~CoreLease() = default;

  /// A blocking call: the operation `s` started, driven to its end.
  Status drive(Status s) { return core_.run(s, &CoreLease::step_of, this); }
  Status begin_extend(Millis ttl, ExtendMode mode, bool nonblocking);
  /// Releases what the attempt got; the attempt then ends with `then`.
  Status hand_back(Status then);

  // What a lease supplies: its requests and the handlers of their replies.
  // Every lease overrides each. They are not pure: a vtable that names
  // __cxa_pure_virtual links the C++ runtime's terminate path, demangler
  // included (about 30 KB), into every static program. The defaults fail
  // closed (kInvalidArgument, no lease time).
  /// The lease length its options ask for (renew(), each attempt).
  virtual Millis lease_ttl() const;
  /// A wait's next attempt, once its pause is over, within `deadline`.
  virtual Status attempt_again(Deadline deadline);
  /// The outcome of the request in flight of an operation other than an
  /// extend (never pending): continues the operation or ends it.
  virtual Status on_reply(const Result<const Reply*>& r);
  /// After an attempt that ended with `s`: waits on, or ends.
  virtual Status attempt_done(Status s);
  /// Sends the release (`hand_back`: of a grant the attempt cannot use),
  /// or returns the error that stopped it (kNotHeld).
  virtual Status release_request(bool hand_back);
  virtual Status extend_request(Millis ttl, ExtendMode mode);
  virtual Status on_extend(const Result<const Reply*>& r);
  /// The reply to a query: an ownership check's (ok: ours, or kNotOwner)
  /// or a status's.
  virtual Status on_query(const Result<const Reply*>& r);

  // The machine's state, shared with the lease that runs it.
  // NOLINTBEGIN(cppcoreguidelines-non-private-member-variables-in-classes)
  LeaseCore core_;
  Millis ext_ttl_{0};
  TimePoint valid_until_{};
  TimePoint req_start_{};  // the request in flight left after this
  TimePoint op_t0_{};      // when the release or extend was called (metrics)
  uint64_t fence_ = 0;
  char token_[kMaxTokenLen] = {};
  // Small fields last: a derived lease's small fields fill the padding.
  bool retired_ = false;   // a release of this token was sent: never granted under it again
  uint8_t token_len_ = 0;  // up to kMaxTokenLen
  Status last_;            // the attempt before a pause, or what a hand-back ends with
                           // NOLINTEND(cppcoreguidelines-non-private-member-variables-in-classes)

 private:
  Status begin_release(bool nonblocking);
  // Lease, for the keeper: the longest one renew() blocks.
  Nanos renew_budget() const final { return core_.command_timeout(); }
  static Status step_of(void* self) { return static_cast<CoreLease*>(self)->step(); }
  static Status again_of(void* self, Deadline deadline);
  static Status reply_of(void* self, const Result<const Reply*>& r);
};

/// A lease whose key holds its token (Lock, FairLock): the extend, the
/// ownership check and adoption they share (Lock's scripts).
class TokenLease : public CoreLease {
 public:
  /// Owner-checked TTL raise; `ttl` > 0 (0 is refused, never a delete).
  /// kAdd: the server's PTTL + ttl; kReplace: max(PTTL, ttl). Never
  /// shorter: a request given up on may still run after a later one, so no
  /// extend may cut a lease (docs/late-requests.md); release() ends it.
  /// While held(), the call waits no later than the current validity end
  /// (a renewal never outlives the lease it renews); otherwise up to the
  /// command timeout. ok means held with validity > 0 left.
  /// Errors: kInvalidArgument (ttl out of range, or an operation in
  /// flight), kNotHeld (no token, or a release of it was sent: nothing is
  /// claimed under it again), kNotOwner (not ours any more: token
  /// dropped), kExpired (applied, but the new TTL minus round trip and
  /// drift leaves no validity: held() false, token kept), kProtocol (reply
  /// not a TTL or 0; connection closed), Connection::command()'s (kTimeout
  /// also when the validity ended first: held() is then false), kNoQuorum
  /// (Sentinel or Cluster with WAIT: applied on the primary, not confirmed
  /// by replicas), kBufferTooSmall.
  /// On the other errors (not kInvalidArgument, kNotHeld, kNotOwner,
  /// kExpired) the new TTL may or may not have been applied: the local
  /// validity becomes the earlier of the old end and (call start + ttl -
  /// drift), and the token is kept for release().
  Status extend(Millis ttl, ExtendMode mode = ExtendMode::kAdd) {
    return drive(begin_extend(ttl, mode, false));
  }
  /// extend(ttl, mode) as steps. Errors: as extend().
  Status start_extend(Millis ttl, ExtendMode mode = ExtendMode::kAdd) {
    return begin_extend(ttl, mode, true);
  }
  /// Asks the server whether the key still holds our token (blocking).
  /// false: not ours, token dropped (held() false). On a shared connection
  /// it waits its turn as any operation does.
  /// Errors: kNotHeld (no token), kInvalidArgument (an operation in
  /// flight), kProtocol, Connection::command()'s.
  Result<bool> owned();
  /// owned() as steps: step() ends with ok (ours) or kNotOwner (not ours:
  /// token dropped). Errors: as owned().
  Status start_owned() { return begin_check(true); }
  /// What the server says about the key, whoever holds it (blocking; on a
  /// shared connection it waits its turn). Errors: kInvalidArgument (not
  /// init()ed, or an operation in flight), kProtocol,
  /// Connection::command()'s.
  Result<KeyStatus> status();
  /// status() as steps: once step() ends with ok, *out holds the answer
  /// (*out must live until then). Errors: as status(); kInvalidArgument
  /// also for a null `out`.
  Status start_status(KeyStatus* out) { return begin_status(out, true); }
  /// Takes over a lease by token (e.g. from another process) so release(),
  /// extend() and owned() act on it. Local validity is unknown (0) until a
  /// successful extend. Errors: kInvalidArgument (empty or too long, or an
  /// operation in flight).
  Status adopt(Bytes token);
  /// Conservative validity left (0 if not held). held() (Lease) is false
  /// from any release() call on, whatever its outcome.
  Nanos remaining() const final { return granted_ ? core_.left(valid_until_) : Nanos::zero(); }

 protected:
  explicit TokenLease(Backend& backend) : CoreLease(backend) {}
  ~TokenLease() = default;

  /// The lease's init(): the core's, then nothing held. Errors:
  /// kInvalidArgument (also: an operation in flight), kRandomFailed.
  Status init_lease(Bytes key, const LeaseTiming& timing, Span<const Bytes> companions);
  /// Drops the token and everything claimed under it.
  virtual void forget();
  /// forget(), then a fresh token. Errors: kRandomFailed.
  Status new_token();
  /// Before an attempt: the token to ask with, the words {key; token,
  /// ttl} every acquire script starts with, and the validity's start.
  /// Errors: kRandomFailed.
  Status begin_attempt();
  Status extend_request(Millis ttl, ExtendMode mode) final;
  Status on_extend(const Result<const Reply*>& r) final;
  Status on_query(const Result<const Reply*>& r) final;

 private:
  Status begin_check(bool nonblocking);
  Status begin_status(KeyStatus* out, bool nonblocking);

 protected:
  // NOLINTBEGIN(cppcoreguidelines-non-private-member-variables-in-classes)
  bool has_token_ = false;           // release/extend may act (held or maybe held)
  bool granted_ = false;             // the server confirmed the grant
  KeyStatus* status_out_ = nullptr;  // where a status() answer goes
  // The request in flight's words (its companion keys are named as it is
  // encoded: ScriptCall::companions).
  RequestWords<3, 1> words_;
  // NOLINTEND(cppcoreguidelines-non-private-member-variables-in-classes)
};

}  // namespace detail
}  // namespace edgelock
