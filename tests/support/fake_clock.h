#pragma once
/// @file fake_clock.h
/// A manually driven clock for tests: time moves only when told to.

#include "edgelock/clock.h"

namespace edgelock {

/// Starts at `start`; sleep_for() advances time instead of blocking.
class FakeClock final : public Clock {
 public:
  explicit constexpr FakeClock(TimePoint start = TimePoint(std::chrono::seconds(1)))
      : now_(start) {}
  TimePoint now() override { return now_; }
  void sleep_for(Nanos d) override {
    if (d > Nanos::zero()) {
      now_ += d;
      slept_ += d;
    }
  }
  void advance(Nanos d) { now_ += d; }
  /// Moves time to `t` (tests; a monotonic clock never goes back).
  void set(TimePoint t) { now_ = t; }
  /// Total time spent in sleep_for(), to check backoff behaviour.
  Nanos slept() const { return slept_; }

 private:
  TimePoint now_;
  Nanos slept_{0};
};

}  // namespace edgelock
