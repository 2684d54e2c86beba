// A client run under libfaketime by clock_step_test.cc: acquire, validity,
// extend, a busy wait, a lease keeper and a validity run-out, each measured
// on CLOCK_MONOTONIC and checked against fixed bounds. Prints one line of
// figures (key=value) that the test compares with a run without faketime.
//
// If EDGELOCK_FAKETIME_FILE is set (libfaketime's FAKETIME_TIMESTAMP_FILE
// with FAKETIME_NO_CACHE=1), a thread rewrites it every 40 ms through
// -1d, +1d, +56y, +0 so the wall clock jumps while operations are in flight.
#include <poll.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

SystemClock g_clock;
int g_failures = 0;

// Whole ms, rounded down.
int64_t ms(Nanos d) { return std::chrono::floor<Millis>(d).count(); }
int64_t ms_since(TimePoint t0) { return ms(g_clock.now() - t0); }

void check(bool ok, const char* what, int64_t value) {
  if (ok) return;
  std::fprintf(stderr, "clock_probe: FAIL %s (%lld)\n", what, static_cast<long long>(value));
  ++g_failures;
}

// Steps the wall clock through a schedule while the probe runs; records the
// lowest and highest wall time (time()) seen so the test can tell the jumps
// really happened.
struct Jumper {
  std::atomic<bool> stop{false};
  std::atomic<long long> min_wall{0}, max_wall{0};
  std::thread thread;

  void run(const char* path) {
    const char* steps[] = {"-1d", "+1d", "+56y", "+0"};
    min_wall = max_wall = static_cast<long long>(time(nullptr));
    for (int i = 0; i < 500 && !stop.load(); ++i) {  // bounded: 20 s at most
      if (FILE* f = std::fopen(path, "w")) {
        std::fprintf(f, "%s\n", steps[i % 4]);
        std::fclose(f);
      }
      const long long w = static_cast<long long>(time(nullptr));
      if (w < min_wall) min_wall = w;
      if (w > max_wall) max_wall = w;
      g_clock.sleep_for(Millis(40));
    }
  }
};

bool open(Connection& c, const char* url) {
  ConnectionOptions o;
  o.connect_timeout = Millis(1000);
  o.command_timeout = Millis(500);
  return c.init(url, o).ok() && c.connect().ok();
}

int probe(const char* url) {
  Connection a, b;
  if (!open(a, url) || !open(b, url)) {
    std::fprintf(stderr, "clock_probe: cannot connect to %s\n", url);
    return 2;
  }
  const int sd =
      std::getenv("EDGELOCK_TEST_SLOWDOWN") ? std::atoi(std::getenv("EDGELOCK_TEST_SLOWDOWN")) : 1;
  const int64_t slack = 60 * (sd > 0 ? sd : 1);
  LockOptions lo;
  lo.ttl = Millis(1000);
  Lock la(a), lb(b);
  if (!la.init(Bytes::from_cstr("clock-probe"), lo).ok() ||
      !lb.init(Bytes::from_cstr("clock-probe"), lo).ok())
    return 2;

  // Acquire: validity just under the TTL (drift 1% + 2 ms + round trip).
  Status st = la.acquire(Millis(500));
  check(st.ok(), "acquire", static_cast<int>(st.code()));
  const int64_t validity0 = ms(la.remaining());
  check(validity0 > 1000 - 12 - slack && validity0 <= 988, "validity after acquire", validity0);
  g_clock.sleep_for(Millis(100));
  const int64_t validity1 = ms(la.remaining());
  const int64_t drop = validity0 - validity1;
  check(drop >= 100 && drop < 100 + slack, "validity drop over 100 ms", drop);

  // Extend back to the full TTL.
  st = la.extend(Millis(1000), ExtendMode::kReplace);
  check(st.ok(), "extend", static_cast<int>(st.code()));
  const int64_t validity2 = ms(la.remaining());
  check(validity2 > 988 - slack && validity2 <= 988, "validity after extend", validity2);

  // A waiter gives up after its wait (kBusy), not earlier, not much later.
  TimePoint w0 = g_clock.now();
  st = lb.acquire(Millis(200));
  const int64_t busy_wait = ms_since(w0);
  check(st.code() == ErrorCode::kBusy, "busy wait result", static_cast<int>(st.code()));
  // The server checks blocking timeouts on its event loop (hz 10): up to
  // 100 ms late.
  check(busy_wait >= 200 && busy_wait < 300 + slack, "busy wait ms", busy_wait);

  // The keeper renews on schedule for 800 ms.
  LeaseKeeper keeper(la);
  check(keeper.start().ok(), "keeper start", 0);
  const TimePoint k0 = g_clock.now();
  for (int i = 0; i < 200 && g_clock.now() - k0 < Millis(800); ++i) {
    const int t = keeper.next_deadline().poll_timeout_ms(g_clock);
    const int left = static_cast<int>(ms(Millis(800) - (g_clock.now() - k0))) + 1;
    poll(nullptr, 0, t < 0 || t > left ? left : t);
    (void)keeper.step();
  }
  const uint32_t renewals = keeper.stats().renewals;
  check(keeper.state() == LeaseState::kKeeping, "keeper state", static_cast<int>(keeper.state()));
  check(renewals >= 2 && renewals <= 3, "keeper renewals", renewals);
  keeper.stop();

  // Release hands over to a waiter within a round trip or so.
  const uint64_t fence_a = la.fence();
  w0 = g_clock.now();
  std::thread releaser([&] {
    g_clock.sleep_for(Millis(50));
    if (!la.release().ok()) ++g_failures;
  });
  st = lb.acquire(Millis(1000));
  const int64_t handover = ms_since(w0);
  releaser.join();
  check(st.ok(), "handover acquire", static_cast<int>(st.code()));
  check(handover >= 50 && handover < 50 + slack, "handover ms", handover);
  const uint64_t fence = lb.fence();
  check(fence > fence_a, "fence increases", static_cast<int64_t>(fence));

  // Validity runs out on the monotonic clock, after ttl minus the margins.
  (void)lb.release();
  LockOptions short_lo = lo;
  short_lo.ttl = Millis(200);
  Lock lc(a);
  if (!lc.init(Bytes::from_cstr("clock-probe-short"), short_lo).ok()) return 2;
  check(lc.try_acquire().ok(), "short acquire", 0);
  const TimePoint v0 = g_clock.now();
  // The last instant held() said yes (read after it, so never early): a
  // sleep that overshoots after the last yes must not count as holding.
  TimePoint last_held = v0;
  for (int i = 0; i < 400 && lc.held(); ++i) {
    last_held = g_clock.now();
    g_clock.sleep_for(Millis(1));
  }
  const int64_t held_ms = ms(last_held - v0);
  check(held_ms >= 200 - 4 - slack && held_ms <= 200, "held ms", held_ms);
  (void)lc.release();

  std::printf(
      "clock_probe: wall=%lld validity0=%lld drop=%lld validity2=%lld busy_wait=%lld "
      "renewals=%u handover=%lld held=%lld failures=%d\n",
      static_cast<long long>(time(nullptr)), static_cast<long long>(validity0),
      static_cast<long long>(drop), static_cast<long long>(validity2),
      static_cast<long long>(busy_wait), renewals, static_cast<long long>(handover),
      static_cast<long long>(held_ms), g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace edgelock

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: clock_probe redis://host:port\n");
    return 2;
  }
  edgelock::Jumper jumper;
  const char* file = std::getenv("EDGELOCK_FAKETIME_FILE");
  if (file) jumper.thread = std::thread([&] { jumper.run(file); });
  const int rc = edgelock::probe(argv[1]);
  if (file) {
    jumper.stop = true;
    jumper.thread.join();
    std::printf("clock_probe: jumps min_wall=%lld max_wall=%lld\n", jumper.min_wall.load(),
                jumper.max_wall.load());
  }
  std::fflush(stdout);
  return rc;
}
