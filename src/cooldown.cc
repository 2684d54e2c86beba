// Cooldown: SET NX PX in one script, with a local refusal hint.
#include "edgelock/cooldown.h"

#include <cstring>

#include "lease_util.h"
#include "metrics_note.h"
#include "rate_scripts.h"

namespace edgelock {

Status Cooldown::init(Bytes key, const CooldownOptions& options) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (options.period_ms < 1 || options.period_ms > kMaxTtlMs) return ErrorCode::kInvalidArgument;
  if (!(options.drift_factor >= 0.0 && options.drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  options_ = options;
  hinted_ = false;
  return Status();
}

Status Cooldown::try_enter(Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  *a = Admission();
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Nanos now = conn_->clock().now();
  if (options_.local_hint && hinted_ && now < refuse_until_) {
    a->retry_after_ms = detail::ms_until(refuse_until_, now);
    a->local = true;
    // Counted as an attempt, with no round trip.
    detail::note(*conn_, metrics_, EventKind::kAdmit, ErrorCode::kBusy, key(), 0);
    return ErrorCode::kBusy;
  }
  const Status s = send_enter(a);
  detail::note(*conn_, metrics_, EventKind::kAdmit, s, key(), conn_->clock().now() - now);
  return s;
}

Status Cooldown::send_enter(Admission* a) {
  const detail::DecimalText period(options_.period_ms);
  const Bytes keys[1] = {key()};
  const Bytes args[1] = {period.bytes()};
  const Nanos start = conn_->clock().now();
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->eval(detail::kCooldownScript, keys, 1, args, 1, d);
  if (!r.ok()) return r.status();
  int64_t ok = 0, ttl = 0;
  if (!detail::int_at(r.value(), 0, &ok) || !detail::int_at(r.value(), 1, &ttl) || ttl < 0) {
    return ErrorCode::kProtocol;
  }
  a->allowed = ok == 1;
  a->retry_after_ms = ttl;
  // The key was (re)armed no earlier than `start`: it lives at least this
  // long on our clock, less the drift allowance.
  refuse_until_ = detail::lease_end(start, ttl, options_.drift_factor);
  hinted_ = true;
  return a->allowed ? Status() : Status(ErrorCode::kBusy);
}

Status Cooldown::enter(Nanos wait, Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  Clock& clock = conn_->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  Status s = try_enter(a);
  for (uint32_t i = 0; s.code() == ErrorCode::kBusy && i < 100000; ++i) {
    const Nanos left = deadline.remaining(clock);
    if (left <= 0) break;
    // Sleep what the server said (at least 1 ms, so we never spin).
    Nanos delay = millis(a->retry_after_ms > 0 ? a->retry_after_ms : 1);
    clock.sleep_for(delay < left ? delay : left);
    s = try_enter(a);
  }
  return s;
}

Result<int64_t> Cooldown::retry_after_ms() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Bytes keys[1] = {key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->eval(detail::kRatePeekScript, keys, 1, nullptr, 0, d);
  if (!r.ok()) return r.status();
  int64_t ttl = 0;
  if (!detail::int_at(r.value(), 0, &ttl)) return ErrorCode::kProtocol;
  return ttl > 0 ? ttl : int64_t{0};
}

Status Cooldown::reset() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  hinted_ = false;
  const Bytes args[2] = {Bytes::from_cstr("DEL"), key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->command(args, 2, d);
  if (!r.ok()) return r.status();
  return r.value()->type == ReplyType::kInteger ? Status() : Status(ErrorCode::kProtocol);
}

}  // namespace edgelock
