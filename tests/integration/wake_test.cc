// Waiting without polling: a released lock is handed to a blocked waiter
// within about a round trip, a crashed holder still lets it in after the
// TTL, and the number of commands per grant stays small.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>

#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

int64_t us(Nanos d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }

class WakeTest : public test::SharedServerTest {
 protected:
  static LockOptions ttl(int64_t ms, bool wake = true) {
    LockOptions o;
    o.ttl = Millis(ms);
    o.wake_on_release = wake;
    return o;
  }
};

// The waiter blocks (the holder's TTL is long), the holder releases: the
// waiter must be granted within a few ms, far below any polling interval.
TEST_F(WakeTest, HandoffIsQuick) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("handoff"), ttl(10000)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("handoff"), ttl(10000)).ok());
  SystemClock clock;
  Nanos handoffs[5] = {};
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(la.try_acquire().ok());
    const uint32_t before = b_.stats().commands;
    std::atomic<TimePoint> granted_at{TimePoint()};
    std::thread waiter([&] {
      if (lb.acquire(Millis(5000) * test::slowdown()).ok()) granted_at = clock.now();
    });
    clock.sleep_for(Millis(60));  // past the backoff's first steps: the waiter is blocked
    const TimePoint released_at = clock.now();
    ASSERT_TRUE(la.release().ok());
    waiter.join();
    ASSERT_NE(granted_at.load(), TimePoint()) << b_.last_error();
    handoffs[round] = granted_at.load() - released_at;
    EXPECT_LE(b_.stats().commands - before, 3u) << "busy attempt, BLPOP, granted attempt";
    ASSERT_TRUE(lb.release().ok());
  }
  std::sort(handoffs, handoffs + 5);
  // The median, so one scheduling hiccup on a busy machine cannot fail it;
  // polling this late into a wait would sleep tens of ms.
  EXPECT_LT(handoffs[2], Millis(15) * test::slowdown()) << "woken by the release, not by a timer";
  std::printf("wake: handoff median %lld us, worst %lld us\n",
              static_cast<long long>(us(handoffs[2])), static_cast<long long>(us(handoffs[4])));
}

// A holder that never releases: no signal comes, the waiter still gets in
// once the TTL runs out, without a long overshoot and with few commands.
TEST_F(WakeTest, CrashedHolderLetsWaiterInAfterTtl) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("crashed"), ttl(300)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("crashed"), ttl(5000)).ok());
  ASSERT_TRUE(la.try_acquire().ok());  // and never released
  SystemClock clock;
  const TimePoint t0 = clock.now();
  ASSERT_TRUE(lb.acquire(Millis(5000) * test::slowdown()).ok()) << b_.last_error();
  const Nanos took = clock.now() - t0;
  EXPECT_GE(took, Millis(250));
  // Redis ends a timed-out BLPOP on its next cron tick (hz 10: up to
  // 100 ms late, and a second short BLPOP may follow); the rest is for the
  // client's own attempt on a busy machine.
  EXPECT_LT(took, Millis(300) + Millis(250) * test::slowdown());
  EXPECT_LE(b_.stats().commands, 6u) << "blocked until the TTL, not polled";
  ASSERT_TRUE(lb.release().ok());
}

// Three threads take turns on one key: every grant costs about one busy
// attempt, one BLPOP, the granted attempt and the release.
TEST_F(WakeTest, CommandsPerGrantStayLow) {
  constexpr int kThreads = 3;
  constexpr int kGrantsEach = 100;
  Connection conns[kThreads];
  for (Connection& c : conns) ASSERT_TRUE(test::open(c, server_->url()));
  std::atomic<int> errors{0};
  std::thread threads[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    threads[t] = std::thread([&, t] {
      Lock l(conns[t]);
      if (!l.init(Bytes::from_cstr("turns"), ttl(10000)).ok()) return errors.fetch_add(1), void();
      for (int i = 0; i < kGrantsEach; ++i) {
        if (!l.acquire(Millis(10000) * test::slowdown()).ok()) return errors.fetch_add(1), void();
        SystemClock().sleep_for(Millis(1));
        if (!l.release().ok()) errors.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  uint32_t commands = 0;
  for (const Connection& c : conns) commands += c.stats().commands;
  const double per_grant = static_cast<double>(commands) / (kThreads * kGrantsEach);
  EXPECT_LE(per_grant, 4.5) << commands << " commands";
  std::printf("wake: %.2f commands per grant\n", per_grant);
}

// Releases with nobody waiting leave at most one short-lived signal.
TEST_F(WakeTest, SignalListNeverGrows) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("lonely"), ttl(1000)).ok());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(l.try_acquire().ok());
    ASSERT_TRUE(l.release().ok());
  }
  EXPECT_EQ(run(admin_, {"LLEN", "{lonely}:wake"}), "1");
  const int pttl = std::stoi(run(admin_, {"PTTL", "{lonely}:wake"}));
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 250);
}

// With the signal off, waiting still works (backoff) and releases push
// nothing.
TEST_F(WakeTest, WakeOffFallsBackToBackoff) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("quiet"), ttl(150, false)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("quiet"), ttl(5000, false)).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  ASSERT_TRUE(lb.acquire(Millis(3000) * test::slowdown()).ok());
  ASSERT_TRUE(lb.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "{quiet}:wake"}), "0");
}

TEST_F(WakeTest, HashTaggedKeyKeepsItsSlot) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("dev:{7}:modem"), ttl(1000)).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  ASSERT_TRUE(l.release().ok());
  EXPECT_EQ(run(admin_, {"LLEN", "dev:{7}:modem:wake"}), "1");
}

}  // namespace
}  // namespace edgelock
