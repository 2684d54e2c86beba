// Quota: a fixed-window counter checked and counted in one script.
#include "edgelock/quota.h"

#include <cstring>

#include "lease_util.h"
#include "metrics_note.h"
#include "rate_scripts.h"

namespace edgelock {

namespace {
constexpr int64_t kMaxLimit = 0x7fffffff;
}  // namespace

Status Quota::init(Bytes key, const QuotaOptions& options) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (options.limit < 1 || options.limit > kMaxLimit) return ErrorCode::kInvalidArgument;
  if (options.window_ms < 1 || options.window_ms > kMaxTtlMs) return ErrorCode::kInvalidArgument;
  if (!(options.drift_factor >= 0.0 && options.drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  options_ = options;
  hinted_ = false;
  return Status();
}

Status Quota::try_take(Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  *a = Admission();
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Nanos now = conn_->clock().now();
  if (options_.local_hint && hinted_ && now < refuse_until_) {
    a->retry_after_ms = detail::ms_until(refuse_until_, now);
    a->local = true;
    detail::note(*conn_, metrics_, EventKind::kAdmit, ErrorCode::kBusy, key(), 0);
    return ErrorCode::kBusy;
  }
  const Status s = send_take(a);
  detail::note(*conn_, metrics_, EventKind::kAdmit, s, key(), conn_->clock().now() - now);
  return s;
}

Status Quota::send_take(Admission* a) {
  const detail::DecimalText limit(options_.limit);
  const detail::DecimalText window(options_.window_ms);
  const Bytes keys[1] = {key()};
  const Bytes args[2] = {limit.bytes(), window.bytes()};
  const Nanos start = conn_->clock().now();
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->eval(detail::kQuotaScript, keys, 1, args, 2, d);
  if (!r.ok()) return r.status();
  int64_t ok = 0, left = 0, ttl = 0;
  if (!detail::int_at(r.value(), 0, &ok) || !detail::int_at(r.value(), 1, &left) ||
      !detail::int_at(r.value(), 2, &ttl) || ttl < 0) {
    return ErrorCode::kProtocol;
  }
  a->allowed = ok == 1;
  a->remaining = left > 0 ? left : 0;
  a->retry_after_ms = a->remaining > 0 ? 0 : ttl;
  hinted_ = a->remaining == 0;
  // Used up: the window lasts at least this long on our clock.
  if (hinted_) refuse_until_ = detail::lease_end(start, ttl, options_.drift_factor);
  return a->allowed ? Status() : Status(ErrorCode::kBusy);
}

Status Quota::take(Nanos wait, Admission* out) {
  Admission local;
  Admission* a = out ? out : &local;
  Clock& clock = conn_->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  Status s = try_take(a);
  for (uint32_t i = 0; s.code() == ErrorCode::kBusy && i < 100000; ++i) {
    const Nanos left = deadline.remaining(clock);
    if (left <= 0) break;
    Nanos delay = millis(a->retry_after_ms > 0 ? a->retry_after_ms : 1);
    clock.sleep_for(delay < left ? delay : left);
    s = try_take(a);
  }
  return s;
}

Result<Admission> Quota::peek() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Bytes keys[1] = {key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->eval(detail::kRatePeekScript, keys, 1, nullptr, 0, d);
  if (!r.ok()) return r.status();
  int64_t ttl = 0, used = 0;
  if (!detail::int_at(r.value(), 0, &ttl) || !detail::int_at(r.value(), 1, &used)) {
    return ErrorCode::kProtocol;
  }
  Admission a;
  a.remaining = ttl == -2 ? options_.limit : options_.limit - used;
  if (a.remaining < 0) a.remaining = 0;
  a.allowed = a.remaining > 0;
  a.retry_after_ms = a.allowed || ttl < 0 ? 0 : ttl;
  return a;
}

Status Quota::reset() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  hinted_ = false;
  const Bytes args[2] = {Bytes::from_cstr("DEL"), key()};
  const Deadline d = Deadline::after(conn_->clock(), conn_->options().command_timeout);
  const Result<const Reply*> r = conn_->command(args, 2, d);
  if (!r.ok()) return r.status();
  return r.value()->type == ReplyType::kInteger ? Status() : Status(ErrorCode::kProtocol);
}

}  // namespace edgelock
