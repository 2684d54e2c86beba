#include "edgelock/clock.h"

#include <cerrno>
#include <climits>
#include <ctime>

namespace edgelock {

TimePoint SystemClock::now() {
  timespec ts{};
  // clock_gettime on these clocks cannot fail on Linux for valid ids.
  clock_gettime(count_suspend_ ? CLOCK_BOOTTIME : CLOCK_MONOTONIC, &ts);
  return TimePoint(std::chrono::seconds(ts.tv_sec) + Nanos(ts.tv_nsec));
}

void SystemClock::sleep_for(Nanos d) {
  if (d <= Nanos::zero()) return;
  // Relative sleeps on the same clock, each recomputed from now(), so an
  // EINTR restart never stretches the wait. Not absolute ones: time shims
  // refuse or mistranslate them (libfaketime 0.9.10 returns EINVAL for
  // CLOCK_MONOTONIC with FAKETIME_DONT_FAKE_MONOTONIC=1, and with a faked
  // CLOCK_BOOTTIME sleeps until the faked deadline: 56 years for +56y).
  const TimePoint until = now() + d;
  const clockid_t id = count_suspend_ ? CLOCK_BOOTTIME : CLOCK_MONOTONIC;
  for (int i = 0; i < 1000; ++i) {
    const Nanos left = until - now();
    if (left <= Nanos::zero()) return;
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
    timespec rel{};
    rel.tv_sec = static_cast<time_t>(secs.count());
    rel.tv_nsec = static_cast<long>((left - secs).count());
    const int rc = clock_nanosleep(id, 0, &rel, nullptr);
    // Refused (seccomp filter, shim): sleep relative without a clock id,
    // or every retry loop would spin.
    if (rc != 0 && rc != EINTR) (void)nanosleep(&rel, nullptr);
  }
}

Clock& default_clock() {
  // CLOCK_BOOTTIME: a lease runs on while the device is suspended.
  static SystemClock clock(true);
  return clock;
}

Deadline Deadline::after(Clock& clock, Nanos timeout) {
  if (timeout < Nanos::zero()) return never();
  const TimePoint now = clock.now();
  if (timeout > kNever - now) return never();
  return Deadline(now + timeout);
}

Nanos Deadline::remaining(Clock& clock) const {
  if (is_never()) return Nanos::max();
  const Nanos left = at_ - clock.now();
  return left > Nanos::zero() ? left : Nanos::zero();
}

int Deadline::poll_timeout_ms(Clock& clock) const {
  if (is_never()) return -1;
  // Rounded up: a poll that wakes before the deadline would only spin.
  const Millis ms = std::chrono::ceil<Millis>(remaining(clock));
  return ms > Millis(INT_MAX) ? INT_MAX : static_cast<int>(ms.count());
}

}  // namespace edgelock
