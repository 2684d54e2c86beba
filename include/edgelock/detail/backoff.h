#pragma once
/// @file detail/backoff.h
/// Internal: not part of the public API.
/// Capped exponential backoff with jitter, for retrying a busy lock. The
/// delay is never zero, so a waiter never busy-spins.

#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/detail/random.h"

namespace edgelock {

class Backoff {
 public:
  /// Delays grow from `min` and are capped at `max` (min > 0, max >= min).
  /// `attempt`: delays already drawn (next() goes on from there).
  Backoff(Nanos min, Nanos max, uint32_t attempt = 0)
      : min_(min), max_(max), attempt_(attempt < kMaxStep ? attempt : kMaxStep) {}
  void reset() { attempt_ = 0; }
  /// The next delay: uniform in [min, min(max, min * 2^attempt)].
  Nanos next(Prng& rng);
  uint32_t attempt() const { return attempt_; }

 private:
  static constexpr uint32_t kMaxStep = 64;  // the cap doubles at most this often
  Nanos min_;
  Nanos max_;
  uint32_t attempt_ = 0;
};

}  // namespace edgelock
