// Snippets for check_compile.py: with -DCASE_OK this must compile cleanly
// (the right units, converted by std::chrono); with -DCASE_<NAME> it adds
// one wrong use that must NOT compile. Never built into a target.
#include <chrono>

#include "../support/fake_clock.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

using namespace std::chrono_literals;

namespace edgelock {

void right_units(Lock& lock, Semaphore& sem, Permit& permit, Clock& clock, FakeClock& fake) {
  LockOptions lo;
  lo.ttl = std::chrono::seconds(3);
  lo.ttl = 3000ms;
  lo.retry_min = 2ms;
  lo.wake_fallback = std::chrono::milliseconds(500);
  (void)lock.acquire(std::chrono::seconds(5));
  (void)lock.acquire(5000ms);
  (void)lock.acquire(Nanos(5000000));
  (void)lock.acquire(kForever);
  (void)lock.extend(Millis(5000));
  (void)lock.extend(5s, ExtendMode::kReplace);
  (void)lock.extend(std::chrono::floor<Millis>(Nanos(5000000)));
  (void)permit.extend(2s);
  const Nanos left = lock.remaining();
  const Millis busy = lock.busy_ttl();
  const bool soon = busy < 3s && left > 1ms;
  const TimePoint end = clock.now() + lock.remaining();
  const Deadline d = Deadline::at(end).min(Deadline::after(clock, 100ms));
  (void)d.poll_timeout_ms(clock);
  TimePoint valid_until = end;  // as a permit keeps it
  ConnectionOptions co;
  co.command_timeout = 2s;
  RateLimiterOptions ro;
  ro.window = std::chrono::minutes(1);
  ro.window = 60s;
  KeeperOptions ko;
  ko.renew_every = 1s;
  KeyStatus ks;
  const bool long_ttl = ks.expires && ks.ttl > 3s;
  Admission a;
  const bool later = a.retry_after > 0ms;
  fake.advance(5ms);
  fake.set(end);
  (void)soon;
  (void)long_ttl;
  (void)valid_until;
  (void)sem;
  (void)later;

#if defined(CASE_ACQUIRE_BARE_INT)
  (void)lock.acquire(5000);  // 5000 what? (ns, us and ms are all plausible)
#elif defined(CASE_EXTEND_BARE_INT)
  (void)lock.extend(5000);
#elif defined(CASE_EXTEND_NANOS)
  (void)lock.extend(std::chrono::nanoseconds(5));  // a TTL in ns would be rounded silently
#elif defined(CASE_TTL_BARE_INT)
  lo.ttl = 3000;
#elif defined(CASE_TTL_FROM_NANOS)
  lo.ttl = Nanos(3000000000);  // finer than ms: say how to round
#elif defined(CASE_SEMAPHORE_EXTEND_BARE_INT)
  (void)permit.extend(2000);
#elif defined(CASE_COMMAND_TIMEOUT_BARE_INT)
  co.command_timeout = 2000;
#elif defined(CASE_WINDOW_BARE_INT)
  ro.window = 60000;
#elif defined(CASE_KEEPER_BARE_INT)
  ko.renew_every = 1000;
#elif defined(CASE_COMPARE_TTL_WITH_INT)
  (void)(ks.ttl > 3000);
#elif defined(CASE_COMPARE_REMAINING_WITH_INT)
  (void)(lock.remaining() > 0);
#elif defined(CASE_DEADLINE_AT_DURATION)
  (void)Deadline::at(Millis(5));  // a duration is not a point in time
#elif defined(CASE_VALID_UNTIL_DURATION)
  valid_until = Millis(5);
#elif defined(CASE_TIME_POINT_AS_DURATION)
  (void)lock.acquire(clock.now());
#elif defined(CASE_FAKE_ADVANCE_BARE_INT)
  fake.advance(5);
#elif defined(CASE_OLD_MILLIS_HELPER)
  (void)lock.acquire(millis(5000));
#elif defined(CASE_OLD_TTL_MS_FIELD)
  lo.ttl_ms = 3000;
#elif !defined(CASE_OK)
#error "no case selected"
#endif
}

}  // namespace edgelock
