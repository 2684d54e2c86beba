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

// How long an unclaimed wake signal lives: long enough to cover a waiter
// that got its busy reply but has not reached BLPOP yet, short enough that
// a stale signal costs at most one extra attempt.
constexpr const char* kWakeSignalTtlMs = "250";

// KEYS[2..] of the acquire ("{key}:fence", "{key}:wake") and the release.
constexpr Bytes kAcquireCompanions[2] = {detail::kFenceSuffix, detail::kWakeSuffix};
constexpr Bytes kReleaseCompanions[1] = {detail::kWakeSuffix};

using detail::kOpAcquire;
using detail::kOpTry;

}  // namespace

Status Lock::init(Bytes key, const LockOptions& options) {
  if (options.wake_fallback < Millis(2)) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(init_lease(key, detail::timing_of(options), kAcquireCompanions));
  wake_supported_ = true;
  options_ = options;
  return Status();
}

void Lock::forget() {
  TokenLease::forget();
  attempted_ = false;
}

// --- The blocking calls: the start/step machine driven to its end.

Status Lock::try_acquire() { return drive(begin_try(false)); }
Status Lock::start_try_acquire() { return begin_try(true); }
Status Lock::acquire(Nanos wait) { return drive(begin_acquire(wait, false)); }
Status Lock::start_acquire(Nanos wait) { return begin_acquire(wait, true); }

Status Lock::on_reply(const Result<const Reply*>& r) {
  switch (req_) {
    case Req::kAttempt: return on_attempt(r);
    case Req::kBlpop: return on_blpop(r);
    case Req::kHandBack:
      core_.noted(EventKind::kRelease, op_t0_, on_release(r)).ignore();
      return attempt_done(last_);
    case Req::kRelease: return core_.finish(EventKind::kRelease, op_t0_, on_release(r));
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

// One counted attempt; with `blpop`, pipelined behind that command
// (lock_wait.cc).
Status Lock::start_attempt(Deadline deadline, Span<const Bytes> blpop) {
  const Status ready = begin_attempt();
  if (!ready.ok()) return core_.end_op(ready);
  attempted_ = true;
  req_ = Req::kAttempt;
  auto& w = words_;
  const size_t ncomp = options_.wake_on_release ? 2 : 1;
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
  if (rep->type != ReplyType::kInteger) {
    return attempt_done(core_.reject("acquire wants an integer"));
  }
  if (rep->integer <= 0) {
    // Negated only within range: -INT64_MIN does not exist.
    core_.set_busy_ttl(rep->integer < -kMaxTtl.count() ? kMaxTtl : Millis(-rep->integer));
    return attempt_done(ErrorCode::kBusy);
  }
  has_token_ = true;
  granted_ = true;
  fence_ = static_cast<uint64_t>(rep->integer);
  valid_until_ = core_.validity_end(req_start_, options_.ttl);
  if (remaining() <= Nanos::zero()) return hand_back(ErrorCode::kExpired);  // too late to use
  return attempt_done(Status());
}

Status Lock::attempt_done(Status s) {
  s = core_.noted(EventKind::kAcquire, req_start_, s);
  Nanos left{0};
  if (core_.op() == kOpAcquire && core_.wait_on(s, &left)) return next_attempt(s, left);
  return core_.end_op(s);
}

// --- Release.

Status Lock::release_request(bool hand_back) {
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
  req_ = hand_back ? Req::kHandBack : Req::kRelease;
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

}  // namespace edgelock
