// FairLock: the start/step machine (the blocking calls drive it to its
// end), joining the queue and the grant. One script call per step
// (fair_scripts.h).
#include "edgelock/fair_lock.h"

#include <cstring>

#include "base/lock_keys.h"
#include "edgelock/detail/connection_io.h"
#include "primitives/fair_scripts.h"

namespace edgelock {

namespace {

// A waiter renews every waiter_timeout / 2; the server ends a BLPOP up to
// one timer period late (1 / hz: 100 ms by default), and the renewal needs
// its round trip: half of this leaves room for both.
constexpr Millis kMinWaiterTimeout{500};

// KEYS[2..] of the acquire.
constexpr Bytes kAcquireCompanions[2] = {detail::kFenceSuffix, detail::kQueueSuffix};

using detail::kOpAcquire;
using detail::kOpLeave;
using detail::kOpTry;

}  // namespace

Status FairLock::init(Bytes key, const FairLockOptions& options) {
  if (options.waiter_timeout < kMinWaiterTimeout || options.waiter_timeout > kMaxTtl) {
    return ErrorCode::kInvalidArgument;
  }
  EDGELOCK_TRY(init_lease(key, detail::timing_of(options), kAcquireCompanions));
  wake_supported_ = true;
  options_ = options;
  return Status();
}

void FairLock::forget() {
  TokenLease::forget();
  joined_ = false;
  position_ = 0;
  seq_ = 0;
  next_seq_ = 0;
}

FairLock::WakeSuffix::WakeSuffix(uint64_t seq) {
  ByteBuilder b(text, sizeof text);
  b.append(":w:", 3);
  b.append_decimal(static_cast<int64_t>(seq));
  len = b.size();
}

// --- The blocking calls: the start/step machine driven to its end.

Status FairLock::try_acquire() { return drive(begin_try(false)); }
Status FairLock::start_try_acquire() { return begin_try(true); }
Status FairLock::acquire(Nanos wait, GiveUp give_up) {
  return drive(begin_acquire(wait, give_up, false));
}
Status FairLock::start_acquire(Nanos wait, GiveUp give_up) {
  return begin_acquire(wait, give_up, true);
}
Status FairLock::leave() { return drive(begin_leave(false)); }
Status FairLock::start_leave() { return begin_leave(true); }

Status FairLock::on_reply(const Result<const Reply*>& r) {
  // NOSCRIPT with an EVAL too long to re-send: nothing ran; load and retry.
  if (r.status().code() == ErrorCode::kBufferTooSmall && req_ != Req::kLoad &&
      req_ != Req::kBlpop && !loaded_) {
    return load_script();
  }
  return on_result(r);
}

Status FairLock::on_result(const Result<const Reply*>& r) {
  switch (req_) {
    case Req::kAttempt: return on_attempt(r);
    case Req::kBlpop: return on_blpop(r);
    case Req::kLoad: return on_load(r);
    case Req::kHandBack:
      core_.noted(EventKind::kRelease, op_t0_, on_release(r)).ignore();
      return wake_or_finish(Req::kHandBack);
    case Req::kRelease:
      last_ = core_.noted(EventKind::kRelease, op_t0_, on_release(r));
      return wake_or_finish(Req::kRelease);
    case Req::kLeave: {
      const Status s = on_leave(r);
      if (core_.op() == kOpLeave) last_ = s;
      return wake_or_finish(Req::kLeave);
    }
    case Req::kWake: return finish(wake_after_);
  }
  return core_.end_op(ErrorCode::kInvalidArgument);
}

// Every script request goes out here: kept for a SCRIPT LOAD's re-send.
Status FairLock::send_call(Req req, const ScriptCall& call, Deadline deadline) {
  req_ = req;
  loaded_ = false;
  call_ = call;
  call_deadline_ = deadline;
  return core_.send(call, deadline);
}

// --- Acquire.

Status FairLock::begin_try(bool nonblocking) {
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpTry, nonblocking));
  join_ = false;
  const Status minted = new_token();
  if (!minted.ok()) return core_.end_op(minted);
  return start_attempt(core_.io_deadline());
}

Status FairLock::begin_acquire(Nanos wait, GiveUp give_up, bool nonblocking) {
  const bool kept = queued();
  if (wait == Nanos::zero() && !kept) return begin_try(nonblocking);
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpAcquire, nonblocking));
  join_ = true;
  give_up_ = give_up;
  blpop_failed_ = false;
  if (!kept) {
    const Status minted = new_token();
    if (!minted.ok()) return core_.end_op(minted);
  }
  // The attempts end by the wait + one command budget; leaving the queue
  // after them gets one more.
  core_.begin_wait(wait);
  return start_attempt(core_.attempt_deadline());
}

// One counted attempt; with `blpop`, pipelined behind that command on the
// plain connection (fair_lock_wait.cc).
Status FairLock::start_attempt(Deadline deadline, Span<const Bytes> blpop) {
  // Retries keep the token: our place, too (the new token after a
  // hand-back queues afresh).
  const Status ready = begin_attempt();
  if (!ready.ok()) return core_.end_op(ready);
  auto& w = words_;
  // +waiter_timeout joins the queue, -waiter_timeout only tries.
  const int64_t wt = options_.waiter_timeout.count();
  num2_.set(join_ ? wt : -wt);
  w.args[2] = num2_.bytes();
  // A lost reply may also mean we queued: leave the queue if the wait ends.
  joined_ = joined_ || join_;
  const ScriptCall call{
      &detail::kFairAcquireScript, {&w.key, 1}, {w.args, 3}, true, kAcquireCompanions};
  if (blpop.empty()) return send_call(Req::kAttempt, call, deadline);
  req_ = Req::kAttempt;
  loaded_ = false;
  call_ = call;
  call_deadline_ = deadline;
  return core_.send_pipelined(blpop, call, deadline);
}

Status FairLock::on_attempt(const Result<const Reply*>& r) {
  // Redis < 6 refuses BLPOP's fractional timeout: stop waiting on signals.
  // Not on a routing back end: there a primary demoted under a BLPOP ends
  // it with an error too (UNBLOCKED), and the next node takes BLPOPs.
  const Status first = core_.first_status();
  if (first.code() == ErrorCode::kServerError && core_.direct()) {
    wake_supported_ = false;
  }
  blpop_failed_ = !first.ok();
  if (!r.ok()) {
    // Granted on the primary but not confirmed by its replicas: a failover
    // could lose it, so hand it back rather than report a grant.
    if (r.status().code() == ErrorCode::kNoQuorum) return hand_back(r.status());
    return attempt_done(r.status());
  }
  // Fail closed: only {fence >= 1, next seq >= 0} is a grant.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kArray || rep->count < 2 ||
      rep->elements[0].type != ReplyType::kInteger) {
    return attempt_done(core_.reject("fair acquire wants an array"));
  }
  if (rep->elements[0].integer <= 0) return attempt_done(on_busy_reply(rep));
  return on_grant(rep);
}

Status FairLock::on_grant(const Reply* rep) {
  if (rep->count != 2 || rep->elements[1].type != ReplyType::kInteger ||
      rep->elements[1].integer < 0) {
    return attempt_done(core_.reject("fair grant wants {fence, next seq}"));
  }
  granted_ = true;
  joined_ = false;  // the grant took us out of the queue
  position_ = 0;
  seq_ = 0;
  fence_ = static_cast<uint64_t>(rep->elements[0].integer);
  next_seq_ = static_cast<uint64_t>(rep->elements[1].integer);
  valid_until_ = core_.validity_end(req_start_, options_.ttl);
  if (remaining() <= Nanos::zero()) return hand_back(ErrorCode::kExpired);  // too late to use
  return attempt_done(Status());
}

// {-wait_ms, position, seq}: how long until something changes by expiry,
// and where we stand (0, 0 if not queued).
Status FairLock::on_busy_reply(const Reply* rep) {
  if (rep->count != 3 || rep->elements[1].type != ReplyType::kInteger ||
      rep->elements[2].type != ReplyType::kInteger || rep->elements[1].integer < 0 ||
      rep->elements[1].integer > UINT32_MAX || rep->elements[2].integer < 0) {
    return core_.reject("fair busy wants {-wait_ms, position, seq}");
  }
  hint_ = Millis(-rep->elements[0].integer);
  core_.set_busy_ttl(hint_);
  position_ = static_cast<uint32_t>(rep->elements[1].integer);
  // A new arrival number (first join, or joined again after dropping out):
  // our wake list is named after it.
  seq_ = static_cast<uint64_t>(rep->elements[2].integer);
  return ErrorCode::kBusy;
}

// After an attempt: wait on (fair_lock_wait.cc), or end, leaving the queue
// first when the wait ended without a grant (best effort: else the place
// lapses after waiter_timeout).
Status FairLock::attempt_done(Status s) {
  s = core_.noted(EventKind::kAcquire, req_start_, s);
  if (core_.op() != kOpAcquire) return core_.end_op(s);
  Nanos left{0};
  if (core_.wait_on(s, &left)) return next_attempt(s, left);
  if (s.ok() || give_up_ != GiveUp::kLeave || !queued()) return core_.end_op(s);
  last_ = s;
  const Status left_status = leave_request(core_.attempts_until());
  if (left_status.code() == ErrorCode::kInProgress) return left_status;
  return core_.end_op(s);
}

}  // namespace edgelock
