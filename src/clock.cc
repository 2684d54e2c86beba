#include "edgelock/clock.h"

#include <cerrno>
#include <climits>
#include <ctime>

namespace edgelock {

Nanos SystemClock::now() {
  timespec ts{};
  // clock_gettime on these clocks cannot fail on Linux for valid ids.
  clock_gettime(count_suspend_ ? CLOCK_BOOTTIME : CLOCK_MONOTONIC, &ts);
  return static_cast<Nanos>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void SystemClock::sleep_for(Nanos ns) {
  if (ns <= 0) return;
  // Relative sleeps on the same clock, each recomputed from now(), so an
  // EINTR restart never stretches the wait. Not absolute ones: time shims
  // refuse or mistranslate them (libfaketime 0.9.10 returns EINVAL for
  // CLOCK_MONOTONIC with FAKETIME_DONT_FAKE_MONOTONIC=1, and with a faked
  // CLOCK_BOOTTIME sleeps until the faked deadline: 56 years for +56y).
  const Nanos until = now() + ns;
  const clockid_t id = count_suspend_ ? CLOCK_BOOTTIME : CLOCK_MONOTONIC;
  for (int i = 0; i < 1000; ++i) {
    const Nanos left = until - now();
    if (left <= 0) return;
    timespec rel{};
    rel.tv_sec = static_cast<time_t>(left / 1000000000);
    rel.tv_nsec = static_cast<long>(left % 1000000000);
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
  if (timeout < 0) return never();
  const Nanos now = clock.now();
  if (timeout > kNever - now) return never();
  return Deadline(now + timeout);
}

Nanos Deadline::remaining(Clock& clock) const {
  if (is_never()) return kNever;
  const Nanos left = at_ - clock.now();
  return left > 0 ? left : 0;
}

int Deadline::poll_timeout_ms(Clock& clock) const {
  if (is_never()) return -1;
  const Nanos left = remaining(clock);
  const Nanos ms = (left + kNanosPerMilli - 1) / kNanosPerMilli;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

}  // namespace edgelock
