// Cooldown: SET NX PX in one script (rate_scripts.h) behind the shared rate
// gate, with its local refusal hint.
#include "edgelock/cooldown.h"

#include "lease/rate_scripts.h"

namespace edgelock {

Status Cooldown::init(Bytes key, const CooldownOptions& options) {
  const detail::RateRule rule{&detail::kCooldownScript, {options.period.count()}, 1};
  EDGELOCK_TRY(gate_.init(key, rule, options.period, options.drift_factor, options.local_hint));
  options_ = options;
  return Status();
}

Result<Millis> Cooldown::retry_after() {
  int64_t pttl = 0, used = 0;
  EDGELOCK_TRY(gate_.peek(&pttl, &used));
  return Millis(pttl > 0 ? pttl : 0);
}

}  // namespace edgelock
