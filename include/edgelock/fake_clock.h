#pragma once
/// @file fake_clock.h
/// A manually driven clock for tests: time moves only when told to.

#include "edgelock/clock.h"

namespace edgelock {

/// Starts at `start`; sleep_for() advances time instead of blocking.
class FakeClock final : public Clock {
 public:
  explicit constexpr FakeClock(Nanos start = 1000 * kNanosPerMilli) : now_(start) {}
  Nanos now() override { return now_; }
  void sleep_for(Nanos ns) override {
    if (ns > 0) {
      now_ += ns;
      slept_ += ns;
    }
  }
  void advance(Nanos ns) { now_ += ns; }
  /// Total time spent in sleep_for(), to check backoff behaviour.
  Nanos slept() const { return slept_; }

 private:
  Nanos now_;
  Nanos slept_ = 0;
};

}  // namespace edgelock
