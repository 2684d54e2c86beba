#pragma once
/// @file clock.h
/// Monotonic time, injectable. The wall clock never decides anything here:
/// every timeout, deadline and validity is measured on a Clock. By default
/// that is CLOCK_BOOTTIME, which (unlike CLOCK_MONOTONIC) keeps counting
/// while the device is suspended, as the server's TTL does: after a resume
/// a lease's local validity is not overstated by the time asleep.

#include <cstdint>

namespace edgelock {

/// Nanoseconds on a monotonic time line. 64-bit everywhere, also on 32-bit
/// targets where time_t or long may be 32 bits.
using Nanos = int64_t;

constexpr Nanos kNanosPerMilli = 1000000;
constexpr Nanos kNanosPerMicro = 1000;

constexpr Nanos millis(int64_t ms) { return ms * kNanosPerMilli; }
/// Rounds down: a validity reported in ms never overstates the truth.
constexpr int64_t to_millis(Nanos ns) { return ns / kNanosPerMilli; }

/// A source of monotonic time that can also sleep. Tests inject a FakeClock.
class Clock {
 public:
  virtual ~Clock() = default;
  /// The current monotonic time.
  virtual Nanos now() = 0;
  /// Sleeps for `ns` (no-op if ns <= 0). A fake clock just advances.
  virtual void sleep_for(Nanos ns) = 0;
};

/// CLOCK_BOOTTIME (the default: a lease keeps running while the device is
/// suspended, so time asleep must count), or CLOCK_MONOTONIC when
/// `count_suspend` is false (stops during suspend: never for validity).
/// sleep_for() sleeps on the same clock (relative clock_nanosleep, re-armed
/// from now() after a signal; plain nanosleep where that is refused).
class SystemClock final : public Clock {
 public:
  explicit constexpr SystemClock(bool count_suspend = true)
      : count_suspend_(count_suspend) {}
  Nanos now() override;
  void sleep_for(Nanos ns) override;

 private:
  bool count_suspend_;
};

/// The process-wide default clock: SystemClock(true), CLOCK_BOOTTIME.
Clock& default_clock();

/// A point in monotonic time after which an operation must give up.
class Deadline {
 public:
  /// A deadline `timeout` after `clock.now()`. A negative timeout means never.
  static Deadline after(Clock& clock, Nanos timeout);
  static constexpr Deadline never() { return Deadline(kNever); }
  static constexpr Deadline at(Nanos when) { return Deadline(when); }

  constexpr bool is_never() const { return at_ == kNever; }
  constexpr Nanos when() const { return at_; }
  bool expired(Clock& clock) const { return !is_never() && clock.now() >= at_; }
  /// Time left, clamped to >= 0; kNever's remaining is INT64_MAX.
  Nanos remaining(Clock& clock) const;
  /// Milliseconds left for poll(): rounded up so we never wake early and
  /// spin, clamped to int; -1 for never.
  int poll_timeout_ms(Clock& clock) const;
  /// The earlier of this and `other`.
  constexpr Deadline min(Deadline other) const {
    return other.at_ < at_ ? other : *this;
  }

 private:
  static constexpr Nanos kNever = INT64_MAX;
  explicit constexpr Deadline(Nanos at) : at_(at) {}
  Nanos at_;
};

}  // namespace edgelock
