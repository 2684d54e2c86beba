// Quota: a fixed-window counter checked and counted in one script
// (rate_scripts.h) behind the shared rate gate.
#include "edgelock/quota.h"

#include "lease/rate_scripts.h"

namespace edgelock {

namespace {
constexpr int64_t kMaxLimit = 0x7fffffff;
}  // namespace

Status Quota::init(Bytes key, const QuotaOptions& options) {
  if (options.limit < 1 || options.limit > kMaxLimit) return ErrorCode::kInvalidArgument;
  const detail::RateRule rule{&detail::kQuotaScript, {options.limit, options.window.count()}, 2};
  EDGELOCK_TRY(gate_.init(key, rule, options.window, options.drift_factor, options.local_hint));
  options_ = options;
  return Status();
}

Result<Admission> Quota::peek() {
  int64_t ttl = 0, used = 0;
  EDGELOCK_TRY(gate_.peek(&ttl, &used));
  Admission a;
  a.remaining = ttl == -2 ? options_.limit : options_.limit - used;
  if (a.remaining < 0) a.remaining = 0;
  a.allowed = a.remaining > 0;
  a.retry_after = Millis(a.allowed || ttl < 0 ? 0 : ttl);
  return a;
}

}  // namespace edgelock
