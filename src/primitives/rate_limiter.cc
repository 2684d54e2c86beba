// RateLimiter: a fixed-window counter checked and counted in one script
// (rate_scripts.h) behind the shared rate gate, with its local refusal hint.
#include "edgelock/rate_limiter.h"

#include "lease/rate_scripts.h"

namespace edgelock {

namespace {
constexpr int64_t kMaxLimit = 0x7fffffff;
}  // namespace

Status RateLimiter::init(Bytes key, const RateLimiterOptions& options) {
  if (options.limit < 1 || options.limit > kMaxLimit) return ErrorCode::kInvalidArgument;
  const detail::RateRule rule{&detail::kRateScript, {options.limit, options.window.count()}, 2};
  EDGELOCK_TRY(gate_.init(key, rule, options.window, options.drift_factor, options.local_hint));
  limit_ = options.limit;
  return Status();
}

Result<Admission> RateLimiter::peek() {
  int64_t ttl = 0, used = 0;
  EDGELOCK_TRY(gate_.peek(&ttl, &used));
  Admission a;
  a.remaining = ttl == -2 ? limit_ : limit_ - used;
  if (a.remaining < 0) a.remaining = 0;
  a.allowed = a.remaining > 0;
  a.retry_after = Millis(a.allowed || ttl < 0 ? 0 : ttl);
  return a;
}

}  // namespace edgelock
