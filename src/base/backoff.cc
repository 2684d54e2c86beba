#include "edgelock/detail/random.h"

namespace edgelock {

Nanos Backoff::next(Prng& rng) {
  Nanos cap = min_;
  for (uint32_t i = 0; i < attempt_ && cap < max_; ++i) cap *= 2;
  if (cap > max_) cap = max_;
  if (attempt_ < kMaxStep) ++attempt_;
  return rng.uniform(min_, cap);
}

}  // namespace edgelock
