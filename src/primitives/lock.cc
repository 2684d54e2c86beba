// Single-instance lock: one script call per operation.
#include "edgelock/lock.h"

#include <cstdint>
#include <cstring>

#include "base/lock_keys.h"
#include "edgelock/bytes.h"
#include "edgelock/detail/connection_io.h"
#include "primitives/eval_capacity.h"  // the build fails if the longest EVAL cannot fit tx_
#include "primitives/lock_scripts.h"

namespace edgelock {

namespace {

constexpr size_t kTokenLen = 32;  // 128 random bits as hex
static_assert(kMaxTokenLen <= UINT8_MAX, "Lock keeps the token's length in a uint8_t");
// How long an unclaimed wake signal lives: long enough to cover a waiter
// that got its busy reply but has not reached BLPOP yet, short enough that
// a stale signal costs at most one extra attempt.
constexpr const char* kWakeSignalTtlMs = "250";

// KEYS[2..] of the acquire ("{key}:fence", "{key}:wake") and the release.
constexpr Bytes kAcquireCompanions[2] = {detail::kFenceSuffix, detail::kWakeSuffix};
constexpr Bytes kReleaseCompanions[1] = {detail::kWakeSuffix};

// What the operation in flight is (LeaseCore::op()).
enum LockOp : uint8_t { kOpTry = 1, kOpAcquire, kOpRelease, kOpExtend };

}  // namespace

Status Lock::init(Bytes key, const LockOptions& options) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (options.wake_fallback < Millis(2)) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key,
                          {options.ttl, options.drift_factor, options.retry_min, options.retry_max},
                          kAcquireCompanions));
  wake_supported_ = true;
  options_ = options;
  forget();
  return Status();
}

void Lock::forget() {
  has_token_ = false;
  retired_ = false;
  granted_ = false;
  attempted_ = false;
  valid_until_ = TimePoint();
  fence_ = 0;
}

Nanos Lock::remaining() const { return granted_ ? core_.left(valid_until_) : Nanos::zero(); }

// --- The blocking calls: the start/step machine driven to its end.

Status Lock::try_acquire() { return core_.run(begin_try(false), &Lock::step_of, this); }
Status Lock::start_try_acquire() { return begin_try(true); }
Status Lock::acquire(Nanos wait) {
  return core_.run(begin_acquire(wait, false), &Lock::step_of, this);
}
Status Lock::start_acquire(Nanos wait) { return begin_acquire(wait, true); }
Status Lock::release() { return core_.run(begin_release(false), &Lock::step_of, this); }
Status Lock::start_release() { return begin_release(true); }
Status Lock::extend(Millis ttl, ExtendMode mode) {
  return core_.run(begin_extend(ttl, mode, false), &Lock::step_of, this);
}
Status Lock::start_extend(Millis ttl, ExtendMode mode) { return begin_extend(ttl, mode, true); }
Status Lock::renew() { return extend(options_.ttl, ExtendMode::kReplace); }
Status Lock::start_renew() { return start_extend(options_.ttl, ExtendMode::kReplace); }

Status Lock::step() {
  if (core_.op() == 0) return ErrorCode::kInvalidArgument;
  if (core_.phase() == detail::OpPhase::kPause) {
    if (!core_.pause_over()) return ErrorCode::kInProgress;
    return start_attempt(core_.attempt_deadline());
  }
  const Result<const Reply*> r = core_.reply();
  if (r.ok() && !r.value()) return ErrorCode::kInProgress;
  switch (req_) {
    case Req::kAttempt: return on_attempt(r);
    case Req::kBlpop: return on_blpop(r);
    case Req::kHandBack:
      core_.noted(EventKind::kRelease, op_t0_, on_release(r)).ignore();
      return attempt_done(last_);
    case Req::kRelease:
      return core_.end_op(core_.noted(EventKind::kRelease, op_t0_, on_release(r)));
    case Req::kExtend: return core_.end_op(core_.noted(EventKind::kExtend, op_t0_, on_extend(r)));
  }
  return core_.end_op(ErrorCode::kInvalidArgument);
}

// --- Acquire.

Status Lock::begin_try(bool nonblocking) {
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpTry, nonblocking));
  return first_attempt();
}

Status Lock::begin_acquire(Nanos wait, bool nonblocking) {
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpAcquire, nonblocking));
  core_.begin_wait(wait);
  return first_attempt();
}

// The first attempt has a fresh token.
Status Lock::first_attempt() {
  const Status minted = new_token();
  if (!minted.ok()) return core_.end_op(minted);
  return start_attempt(core_.io_deadline());
}

Status Lock::new_token() {
  forget();
  EDGELOCK_TRY(core_.mint(token_, kTokenLen));
  token_len_ = kTokenLen;
  return Status();
}

// One counted attempt; with `blpop`, pipelined behind that command
// (lock_wait.cc).
Status Lock::start_attempt(Deadline deadline, Span<const Bytes> blpop) {
  // Retries keep the token (the script recognises a grant whose reply we
  // lost), except after a hand-back whose outcome is unknown: that delete
  // may still land and must find no grant under its token. The old lease,
  // if the hand-back never lands, lapses by its TTL.
  if (retired_) {
    const Status minted = new_token();
    if (!minted.ok()) return core_.end_op(minted);
  }
  auto& w = words_;
  w.key = key();
  w.num[0].set(options_.ttl.count());
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  const size_t ncomp = options_.wake_on_release ? 2 : 1;
  // From here a lost reply may mean the key is ours (also on a retry after
  // a late grant was handed back): keep the token so release() can clean up.
  has_token_ = true;
  attempted_ = true;
  req_ = Req::kAttempt;
  // Validity counts from before the request leaves (before the BLPOP, if
  // any): the server's TTL may have started any time after this.
  req_start_ = clock().now();
  const ScriptCall call{
      &detail::kAcquireScript, {&w.key, 1}, {w.args, 2}, true, {kAcquireCompanions, ncomp}};
  if (blpop.empty()) return core_.send(call, deadline);
  return core_.send_pipelined(blpop, call, deadline);
}

Status Lock::on_attempt(const Result<const Reply*>& r) {
  // Redis < 6 refuses BLPOP's fractional timeout: stop waiting on signals.
  // Not on a routing back end: a primary demoted under a BLPOP ends it
  // with an error too (UNBLOCKED), and the next node takes BLPOPs.
  if (core_.first_status().code() == ErrorCode::kServerError && core_.direct()) {
    wake_supported_ = false;
  }
  if (!r.ok()) {
    // Granted on the primary but not confirmed by its replicas: a failover
    // could lose it, so hand it back rather than report a grant.
    if (r.status().code() == ErrorCode::kNoQuorum) return hand_back(r.status());
    return attempt_done(r.status());
  }
  const Reply* rep = r.value();
  // Fail closed: only an integer fence (> 0) is a grant.
  if (rep->type != ReplyType::kInteger)
    return attempt_done(core_.reject("acquire wants an integer"));
  if (rep->integer <= 0) {
    core_.set_busy_ttl(Millis(-rep->integer));
    return attempt_done(ErrorCode::kBusy);
  }
  has_token_ = true;
  granted_ = true;
  fence_ = static_cast<uint64_t>(rep->integer);
  valid_until_ = core_.validity_end(req_start_, options_.ttl);
  if (remaining() <= Nanos::zero()) return hand_back(ErrorCode::kExpired);  // too late to use
  return attempt_done(Status());
}

// Releases what the attempt got; the attempt then ends with `then`.
Status Lock::hand_back(Status then) {
  last_ = then;
  op_t0_ = clock().now();
  const Status s = release_request(Req::kHandBack);
  if (s.code() == ErrorCode::kInProgress) return s;
  core_.noted(EventKind::kRelease, op_t0_, s).ignore();
  return attempt_done(then);
}

Status Lock::attempt_done(Status s) {
  s = core_.noted(EventKind::kAcquire, req_start_, s);
  Nanos left{0};
  if (core_.op() == kOpAcquire && core_.wait_on(s, &left)) return next_attempt(s, left);
  return core_.end_op(s);
}

// --- Release.

Status Lock::begin_release(bool nonblocking) {
  EDGELOCK_TRY(core_.begin_op(kOpRelease, nonblocking));
  op_t0_ = clock().now();
  const Status s = release_request(Req::kRelease);
  if (s.code() == ErrorCode::kInProgress) return s;
  return core_.end_op(core_.noted(EventKind::kRelease, op_t0_, s));
}

Status Lock::release_request(Req req) {
  if (!has_token_) return ErrorCode::kNotHeld;
  // Whatever the outcome, the lease is no longer ours to use: the delete
  // may run even if its reply never comes, so nothing is claimed under
  // this token again. It stays for a retry of the release.
  granted_ = false;
  retired_ = true;
  valid_until_ = TimePoint();
  auto& w = words_;
  w.key = key();
  w.args[0] = token();
  w.args[1] = Bytes::from_cstr(kWakeSignalTtlMs);
  const size_t n = options_.wake_on_release ? 1 : 0;
  req_ = req;
  return core_.send(
      {&detail::kReleaseScript, {&w.key, 1}, {w.args, n + 1}, false, {kReleaseCompanions, n}},
      core_.io_deadline());
}

Status Lock::on_release(const Result<const Reply*>& r) {
  if (!r.ok()) return r.status();
  // Only the script's 1 or 0 is an answer; anything else keeps the token
  // so the caller can try again.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || rep->integer > 1) {
    return core_.reject("release wants 0 or 1");
  }
  // Not ours on the server, and never granted to us: nothing was held.
  const bool never_granted = attempted_ && fence_ == 0;
  forget();
  if (rep->integer == 1) return Status();
  return never_granted ? ErrorCode::kNotHeld : ErrorCode::kNotOwner;
}

// --- Extend.

Status Lock::begin_extend(Millis ttl, ExtendMode mode, bool nonblocking) {
  EDGELOCK_TRY(core_.begin_op(kOpExtend, nonblocking));
  op_t0_ = clock().now();
  const Status s = extend_request(ttl, mode);
  if (s.code() == ErrorCode::kInProgress) return s;
  return core_.end_op(core_.noted(EventKind::kExtend, op_t0_, s));
}

Status Lock::extend_request(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_ || retired_) return ErrorCode::kNotHeld;
  auto& w = words_;
  w.num[0].set(ttl.count());
  w.key = key();
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  w.args[2] = Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set");
  ext_ttl_ = ttl;
  req_start_ = clock().now();
  req_ = Req::kExtend;
  // A renewal never waits past the lease it renews: at its end the caller
  // must learn of the loss (e.g. to stop the work it guards).
  const Deadline d = core_.renewal_deadline(granted_ ? valid_until_ : TimePoint(), req_start_);
  return core_.send({&detail::kExtendScript, {&w.key, 1}, {w.args, 3}, true}, d);
}

Status Lock::on_extend(const Result<const Reply*>& r) {
  if (!r.ok()) return after_unknown_extend(req_start_, ext_ttl_, r.status());
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || Millis(rep->integer) > 2 * kMaxTtl) {
    return after_unknown_extend(req_start_, ext_ttl_, core_.reject("extend wants a TTL or 0"));
  }
  if (rep->integer == 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  granted_ = true;
  valid_until_ = core_.validity_end(req_start_, Millis(rep->integer));
  // ok means usable: a TTL the round trip and drift eat is not (token kept).
  if (remaining() <= Nanos::zero()) return ErrorCode::kExpired;
  return Status();
}

Status Lock::after_unknown_extend(TimePoint start, Millis ttl, Status s) {
  // The new TTL may have been applied (timeout, lost reply, WAIT short of
  // its replicas), or not: the lease lasts until the earlier of the two.
  if (granted_) valid_until_ = core_.least_end(valid_until_, start, ttl);
  return s;
}

// --- Queries (blocking only).

Result<bool> Lock::owned() {
  if (!has_token_) return ErrorCode::kNotHeld;
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  const Result<bool> r = core_.check_owned(detail::kOwnedScript, token());
  if (r.ok() && !r.value()) forget();
  return r;
}

Result<KeyStatus> Lock::status() { return core_.key_status(); }

Status Lock::adopt(Bytes token) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (token.size == 0 || token.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  forget();
  std::memcpy(token_, token.data, token.size);
  token_len_ = static_cast<uint8_t>(token.size);
  has_token_ = true;
  return Status();
}

}  // namespace edgelock
