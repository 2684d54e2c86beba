// RateGate: RateLimiter's decision script, local refusal hint and wait, as
// a start/step machine on LeaseCore's operation in flight.
#include "edgelock/detail/rate_gate.h"

#include "base/duration.h"
#include "lease/lease_util.h"
#include "lease/rate_scripts.h"

namespace edgelock {
namespace detail {

namespace {

// What the operation in flight is (LeaseCore::op()).
enum GateOp : uint8_t { kOpAdmit = 1, kOpPeek, kOpErase };

}  // namespace

Status RateGate::init(Bytes key, const RateRule& rule, Millis ttl, double drift_factor,
                      bool local_hint) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (!rule.script || rule.nargs > 2) return ErrorCode::kInvalidArgument;
  // The gate waits what the server says, not a backoff: 1 ms is its floor.
  EDGELOCK_TRY(core_.init(key, {ttl, drift_factor, Millis(1), Millis(1)}));
  script_ = rule.script;
  nargs_ = rule.nargs;
  limit_ = rule.args[0];
  for (size_t i = 0; i < nargs_; ++i) words_.num[i].set(rule.args[i]);
  local_hint_ = local_hint;
  hinted_ = false;
  return Status();
}

// --- The blocking call: the start/step machine driven to its end.

Status RateGate::wait_admit(Nanos wait, Admission* out) {
  return core_.run(begin_admit(wait, out, false), &RateGate::step_of, this);
}

Status RateGate::start_admit(Nanos wait, Admission* out) { return begin_admit(wait, out, true); }

Status RateGate::begin_admit(Nanos wait, Admission* out, bool nonblocking) {
  if (!core_.ready()) {
    if (out) *out = Admission();
    return ErrorCode::kInvalidArgument;
  }
  EDGELOCK_TRY(core_.begin_op(kOpAdmit, nonblocking));
  out_ = out ? out : &own_;
  // kExpired: admitted too late to act on; the next try may be in time.
  core_.begin_wait(wait, RetryOn::kRefusal);
  return attempt(core_.io_deadline());
}

Status RateGate::step() { return core_.step(&again_of, &reply_of, this); }

Status RateGate::again_of(void* self, Deadline deadline) {
  return static_cast<RateGate*>(self)->attempt(deadline);
}

Status RateGate::reply_of(void* self, const Result<const Reply*>& r) {
  RateGate& g = *static_cast<RateGate*>(self);
  switch (g.core_.op()) {
    case kOpPeek: return g.core_.end_op(g.on_peek(r));
    case kOpErase: {
      const bool ok = r.ok() && r.value()->type == ReplyType::kInteger;
      return g.core_.end_op(r.ok() && !ok ? g.core_.reject("DEL wants an integer") : r.status());
    }
    default: return g.attempt_done(g.decide(r));
  }
}

// One counted attempt: refused at once while the hint holds, else the
// script's request (kInProgress).
Status RateGate::attempt(Deadline deadline) {
  *out_ = Admission();
  req_start_ = core_.clock().now();
  if (local_hint_ && hinted_ && req_start_ < refuse_until_) {
    // Refused with no round trip (still counted as an attempt).
    out_->retry_after = ms_until(refuse_until_, req_start_);
    out_->local = true;
    return attempt_done(ErrorCode::kBusy);
  }
  auto& w = words_;
  w.key = key();
  for (size_t i = 0; i < nargs_; ++i) w.args[i] = w.num[i].bytes();
  return core_.send({script_, {&w.key, 1}, {w.args, nargs_}, true}, deadline);
}

Status RateGate::decide(const Result<const Reply*>& r) {
  if (!r.ok()) return r.status();
  int64_t ok = 0, left = 0, pttl = 0;
  if (!int_at(r.value(), 0, &ok) || !int_at(r.value(), 1, &left) || !int_at(r.value(), 2, &pttl) ||
      pttl < 0) {
    return ErrorCode::kProtocol;
  }
  Admission* a = out_;
  const Millis ttl(pttl);
  a->allowed = ok == 1;
  a->remaining = left > 0 ? left : 0;
  a->retry_after = a->remaining > 0 ? Millis(0) : ttl;
  // Used up: the key was (re)armed no earlier than the request left, so
  // it lives at least until then on our clock, less the drift allowance.
  const TimePoint end = core_.validity_end(req_start_, ttl);
  hinted_ = a->remaining == 0;
  refuse_until_ = end;
  if (!a->allowed) return ErrorCode::kBusy;
  // An allowed answer is usable only while its window surely lasts on our
  // clock; later, acting on it could overlap the next one.
  if (core_.clock().now() < end) return Status();
  a->allowed = false;  // counted, but too late to act on
  a->retry_after = Millis(0);
  return ErrorCode::kExpired;
}

// Counts the attempt; while the wait goes on, pauses what the server said
// (at least 1 ms, so the loop never spins), else ends the operation.
Status RateGate::attempt_done(Status s) {
  s = core_.noted(EventKind::kAdmit, req_start_, s);
  Nanos left{0};
  if (!core_.wait_on(s, &left)) return core_.end_op(s);
  const Millis wait = out_->retry_after > Millis(0) ? out_->retry_after : Millis(1);
  return core_.pause(Nanos(wait) < left ? Nanos(wait) : left);
}

Result<Admission> RateGate::peek() {
  Admission a;
  EDGELOCK_TRY(core_.run(begin_peek(&a, false), &RateGate::step_of, this));
  return a;
}

Status RateGate::begin_peek(Admission* out, bool nonblocking) {
  if (!core_.ready() || !out) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpPeek, nonblocking));
  out_ = out;
  words_.key = key();
  return core_.send({&kRatePeekScript, {&words_.key, 1}}, core_.io_deadline());
}

// kRatePeekScript answers {PTTL, count}: allowed while the count is under
// the limit; used up, the key's PTTL is the time until the next attempt.
Status RateGate::on_peek(const Result<const Reply*>& r) {
  if (!r.ok()) return r.status();
  int64_t ttl = 0, used = 0;
  if (!int_at(r.value(), 0, &ttl) || !int_at(r.value(), 1, &used)) {
    return core_.reject("peek wants {PTTL, count}");
  }
  Admission& a = *out_;
  a = Admission();
  a.remaining = ttl == -2 ? limit_ : limit_ - used;
  if (a.remaining < 0) a.remaining = 0;
  a.allowed = a.remaining > 0;
  a.retry_after = Millis(a.allowed || ttl < 0 ? 0 : ttl);
  return Status();
}

// A plain DEL (its words in words_ until the reply is in).
Status RateGate::begin_erase(bool nonblocking) {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpErase, nonblocking));
  hinted_ = false;
  words_.args[0] = Bytes::from_cstr("DEL");
  words_.args[1] = key();
  return core_.send({nullptr, {}, {words_.args, 2}}, core_.io_deadline());
}

}  // namespace detail
}  // namespace edgelock
