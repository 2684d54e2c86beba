// RateGate: the key, local hint, wait loop, peek and reset shared by the
// rate limiters (Cooldown, Quota).
#include "edgelock/detail/rate_gate.h"

#include <cstring>

#include "lease_util.h"
#include "metrics_note.h"
#include "rate_scripts.h"

namespace edgelock {
namespace detail {

Status RateGate::init_gate(Bytes key, double drift_factor, bool local_hint) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (!(drift_factor >= 0.0 && drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  drift_factor_ = drift_factor;
  local_hint_ = local_hint;
  hinted_ = false;
  return Status();
}

Status RateGate::try_admit(Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  *a = Admission();
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const TimePoint now = conn_->clock().now();
  if (local_hint_ && hinted_ && now < refuse_until_) {
    a->retry_after = ms_until(refuse_until_, now);
    a->local = true;
    // Counted as an attempt, with no round trip.
    note(*conn_, metrics_, EventKind::kAdmit, ErrorCode::kBusy, key(), Nanos::zero());
    return ErrorCode::kBusy;
  }
  const Status s = send(a);
  note(*conn_, metrics_, EventKind::kAdmit, s, key(), conn_->clock().now() - now);
  return s;
}

Status RateGate::wait_admit(Nanos wait, Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  Clock& clock = conn_->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  Status s = try_admit(a);
  // kExpired: admitted too late to act on; the next try may be in time.
  for (uint32_t i = 0; (s.code() == ErrorCode::kBusy || s.code() == ErrorCode::kExpired) && i < 100000;
       ++i) {
    const Nanos left = deadline.remaining(clock);
    if (left <= Nanos::zero()) break;
    // Sleep what the server said (at least 1 ms, so we never spin).
    const Nanos delay = a->retry_after > Millis(0) ? a->retry_after : Millis(1);
    clock.sleep_for(delay < left ? delay : left);
    s = try_admit(a);
  }
  return s;
}

Result<const Reply*> RateGate::eval_key(const Script& script, Span<const Bytes> args) {
  const Bytes keys[1] = {key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  return conn_->eval({&script, keys, args}, d);
}

Status RateGate::peek_key(int64_t* pttl, int64_t* used) {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Result<const Reply*> r = eval_key(kRatePeekScript, {});
  if (!r.ok()) return r.status();
  if (!int_at(r.value(), 0, pttl) || (used && !int_at(r.value(), 1, used))) {
    return ErrorCode::kProtocol;
  }
  return Status();
}

Status RateGate::reset_key() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  hinted_ = false;
  const Bytes args[2] = {Bytes::from_cstr("DEL"), key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->command(args, d);
  if (!r.ok()) return r.status();
  return r.value()->type == ReplyType::kInteger ? Status() : Status(ErrorCode::kProtocol);
}

Status RateGate::admitted(Admission* a, TimePoint start, Millis ttl) {
  if (!a->allowed) return ErrorCode::kBusy;
  if (conn_->clock().now() < lease_end(start, ttl, drift_factor_)) return Status();
  a->allowed = false;  // counted, but too late to act on
  a->retry_after = Millis(0);
  return ErrorCode::kExpired;
}

void RateGate::set_hint(bool on, TimePoint start, Millis ttl) {
  hinted_ = on;
  if (on) refuse_until_ = lease_end(start, ttl, drift_factor_);
}

}  // namespace detail
}  // namespace edgelock
