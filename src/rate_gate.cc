// RateGate: one decision script, the local refusal hint and the wait loop
// shared by the rate limiters (Cooldown, Quota).
#include "edgelock/detail/rate_gate.h"

#include "duration.h"
#include "lease_util.h"
#include "rate_scripts.h"

namespace edgelock {
namespace detail {

Status RateGate::init(Bytes key, const RateRule& rule, Millis ttl, double drift_factor,
                      bool local_hint) {
  if (!rule.script || rule.nargs > 2) return ErrorCode::kInvalidArgument;
  // The gate waits what the server says, not a backoff: 1 ms is its floor.
  EDGELOCK_TRY(core_.init(key, {ttl, drift_factor, Millis(1), Millis(1)}));
  script_ = rule.script;
  nargs_ = rule.nargs;
  for (size_t i = 0; i < nargs_; ++i) args_[i].set(rule.args[i]);
  local_hint_ = local_hint;
  hinted_ = false;
  return Status();
}

Status RateGate::try_admit(Admission* out) {
  Admission local;
  return attempt(out ? out : &local, core_.io_deadline());
}

Status RateGate::attempt(Admission* a, Deadline deadline) {
  *a = Admission();
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  const TimePoint now = core_.clock().now();
  Status s = ErrorCode::kBusy;
  if (local_hint_ && hinted_ && now < refuse_until_) {
    // Refused with no round trip (still counted as an attempt).
    a->retry_after = ms_until(refuse_until_, now);
    a->local = true;
  } else {
    s = decide(a, deadline);
  }
  return core_.noted(EventKind::kAdmit, now, s);
}

Status RateGate::decide(Admission* a, Deadline deadline) {
  const Bytes args[2] = {args_[0].bytes(), args_[1].bytes()};
  const Bytes keys[1] = {key()};
  const TimePoint start = core_.clock().now();
  const Result<const Reply*> r =
      core_.backend().eval({script_, keys, {args, nargs_}, true}, deadline);
  if (!r.ok()) return r.status();
  int64_t ok = 0, left = 0, pttl = 0;
  if (!int_at(r.value(), 0, &ok) || !int_at(r.value(), 1, &left) || !int_at(r.value(), 2, &pttl) ||
      pttl < 0) {
    return ErrorCode::kProtocol;
  }
  const Millis ttl(pttl);
  a->allowed = ok == 1;
  a->remaining = left > 0 ? left : 0;
  a->retry_after = a->remaining > 0 ? Millis(0) : ttl;
  // Used up: the key was (re)armed no earlier than `start`, so it lives at
  // least until then on our clock, less the drift allowance.
  const TimePoint end = core_.validity_end(start, ttl);
  hinted_ = a->remaining == 0;
  refuse_until_ = end;
  if (!a->allowed) return ErrorCode::kBusy;
  // An allowed answer is usable only while its period or window surely
  // lasts on our clock; later, acting on it could overlap the next one.
  if (core_.clock().now() < end) return Status();
  a->allowed = false;  // counted, but too late to act on
  a->retry_after = Millis(0);
  return ErrorCode::kExpired;
}

Status RateGate::wait_admit(Nanos wait, Admission* out) {
  struct Waiter {
    RateGate* gate;
    Admission* a;
  };
  Admission local;
  Waiter w{this, out ? out : &local};
  const Deadline deadline = core_.wait_deadline(wait);
  const auto step = [](void* self, Status, Nanos left, Deadline op) {
    Waiter* wt = static_cast<Waiter*>(self);
    // Sleep what the server said (at least 1 ms, so we never spin).
    const Nanos delay =
        wt->a->retry_after > Millis(0) ? Nanos(wt->a->retry_after) : Nanos(Millis(1));
    wt->gate->core_.clock().sleep_for(delay < left ? delay : left);
    return wt->gate->attempt(wt->a, wt->gate->core_.io_deadline().min(op));
  };
  // kExpired: admitted too late to act on; the next try may be in time.
  return core_.retry(try_admit(w.a), deadline, RetryOn::kRefusal, step, &w);
}

Status RateGate::peek(int64_t* pttl, int64_t* used) {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  const Bytes keys[1] = {key()};
  const Result<const Reply*> r =
      core_.backend().eval({&kRatePeekScript, keys}, core_.io_deadline());
  if (!r.ok()) return r.status();
  if (!int_at(r.value(), 0, pttl) || !int_at(r.value(), 1, used)) return ErrorCode::kProtocol;
  return Status();
}

Status RateGate::erase_on_server() {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  hinted_ = false;
  const Bytes args[2] = {Bytes::from_cstr("DEL"), key()};
  const Result<const Reply*> r = core_.backend().command(key(), args, core_.io_deadline());
  if (!r.ok()) return r.status();
  return r.value()->type == ReplyType::kInteger ? Status() : Status(ErrorCode::kProtocol);
}

}  // namespace detail
}  // namespace edgelock
