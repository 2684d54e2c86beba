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
  return Status();
}

}  // namespace edgelock
