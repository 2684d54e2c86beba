#pragma once
/// @file clock.h
/// Monotonic time, injectable. The wall clock never decides anything here:
/// every timeout, deadline and validity is measured on a Clock. By default
/// that is CLOCK_BOOTTIME, which (unlike CLOCK_MONOTONIC) keeps counting
/// while the device is suspended, as the server's TTL does: after a resume
/// a lease's local validity is not overstated by the time asleep.
///
/// Every duration in the API is a std::chrono duration, so a bare number or
/// the wrong kind of time does not compile and units convert themselves:
/// pass std::chrono::milliseconds(5000) or 5s (std::chrono_literals) where
/// a Nanos is wanted. A Millis parameter (TTLs: the server counts in ms)
/// takes ms or coarser; from a finer duration, say how to round
/// (std::chrono::floor / ceil / duration_cast).

#include <chrono>
#include <cstdint>

namespace edgelock {

/// A duration in nanoseconds. 64-bit signed everywhere, also on 32-bit
/// targets where time_t or long may be 32 bits.
using Nanos = std::chrono::nanoseconds;
/// A duration in milliseconds (TTLs, periods, windows: the server's unit).
using Millis = std::chrono::milliseconds;

class Clock;
/// A point on a Clock's monotonic time line (nanosecond resolution). Only
/// comparable with points of the same clock.
using TimePoint = std::chrono::time_point<Clock, Nanos>;

/// A wait without end: acquire(kForever). Any negative wait means the same.
constexpr Nanos kForever = Nanos::max();

/// A source of monotonic time that can also sleep. Tests inject a FakeClock.
class Clock {
 public:
  using duration = Nanos;
  using rep = Nanos::rep;
  using period = Nanos::period;
  using time_point = TimePoint;

  /// The current monotonic time.
  virtual TimePoint now() = 0;
  /// Sleeps for `d` (no-op if d <= 0). A fake clock just advances.
  virtual void sleep_for(Nanos d) = 0;

 protected:
  // Never deleted through a Clock: a trivial destructor lets the default
  // clock be constant-initialized, with no guard or exit-time destructor.
  ~Clock() = default;
};

/// CLOCK_BOOTTIME (the default: a lease keeps running while the device is
/// suspended, so time asleep must count), or CLOCK_MONOTONIC when
/// `count_suspend` is false (stops during suspend: never for validity).
/// sleep_for() sleeps on the same clock (relative clock_nanosleep, re-armed
/// from now() after a signal; plain nanosleep where that is refused).
class SystemClock final : public Clock {
 public:
  explicit constexpr SystemClock(bool count_suspend = true) : count_suspend_(count_suspend) {}
  TimePoint now() override;
  void sleep_for(Nanos d) override;

 private:
  bool count_suspend_;
};

/// The process-wide default clock: SystemClock(true), CLOCK_BOOTTIME.
Clock& default_clock();

/// A point in monotonic time after which an operation must give up.
class Deadline {
 public:
  /// A deadline `timeout` after `clock.now()`. A negative timeout, or one
  /// past the end of the time line (kForever), means never.
  static Deadline after(Clock& clock, Nanos timeout);
  static constexpr Deadline never() { return Deadline(kNever); }
  static constexpr Deadline at(TimePoint when) { return Deadline(when); }

  constexpr bool is_never() const { return at_ == kNever; }
  constexpr TimePoint when() const { return at_; }
  bool expired(Clock& clock) const { return !is_never() && clock.now() >= at_; }
  /// Time left, clamped to >= 0; never()'s remaining is Nanos::max().
  Nanos remaining(Clock& clock) const;
  /// Milliseconds left for poll(): rounded up so we never wake early and
  /// spin, clamped to int; -1 for never.
  int poll_timeout_ms(Clock& clock) const;
  /// The earlier of this and `other`.
  constexpr Deadline min(Deadline other) const { return other.at_ < at_ ? other : *this; }

 private:
  static constexpr TimePoint kNever = TimePoint::max();
  explicit constexpr Deadline(TimePoint at) : at_(at) {}
  TimePoint at_;
};

}  // namespace edgelock
