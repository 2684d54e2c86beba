// Quota: a fixed-window counter checked and counted in one script (the
// shared mechanics are in rate_gate.cc).
#include "edgelock/quota.h"

#include "lease_util.h"
#include "rate_scripts.h"

namespace edgelock {

namespace {
constexpr int64_t kMaxLimit = 0x7fffffff;
}  // namespace

Status Quota::init(Bytes key, const QuotaOptions& options) {
  if (options.limit < 1 || options.limit > kMaxLimit) return ErrorCode::kInvalidArgument;
  if (options.window < Millis(1) || options.window > kMaxTtl) return ErrorCode::kInvalidArgument;
  const Status s = init_gate(key, options.drift_factor, options.local_hint);
  if (!s.ok()) return s;
  options_ = options;
  return Status();
}

Status Quota::try_take(Admission* out) { return try_admit(out); }

Status Quota::take(Nanos wait, Admission* out) { return wait_admit(wait, out); }

Status Quota::send(Admission* a) {
  const detail::DecimalText limit(options_.limit);
  const detail::DecimalText window(options_.window);
  const Bytes args[2] = {limit.bytes(), window.bytes()};
  const TimePoint start = connection().clock().now();
  const Result<const Reply*> r = eval_key(detail::kQuotaScript, args);
  if (!r.ok()) return r.status();
  int64_t ok = 0, left = 0, pttl = 0;
  if (!detail::int_at(r.value(), 0, &ok) || !detail::int_at(r.value(), 1, &left) ||
      !detail::int_at(r.value(), 2, &pttl) || pttl < 0) {
    return ErrorCode::kProtocol;
  }
  const Millis ttl(pttl);
  a->allowed = ok == 1;
  a->remaining = left > 0 ? left : 0;
  a->retry_after = a->remaining > 0 ? Millis(0) : ttl;
  // Used up: the window lasts at least this long on our clock.
  set_hint(a->remaining == 0, start, ttl);
  return admitted(a, start, ttl);
}

Result<Admission> Quota::peek() {
  int64_t ttl = 0, used = 0;
  const Status s = peek_key(&ttl, &used);
  if (!s.ok()) return s;
  Admission a;
  a.remaining = ttl == -2 ? options_.limit : options_.limit - used;
  if (a.remaining < 0) a.remaining = 0;
  a.allowed = a.remaining > 0;
  a.retry_after = Millis(a.allowed || ttl < 0 ? 0 : ttl);
  return a;
}

Status Quota::reset() { return reset_key(); }

}  // namespace edgelock
