// No heap after init: reentrant lock, semaphore, rate limiter, metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "../support/alloc_counter.h"
#include "../support/fake_clock.h"
#include "../support/redis_server.h"
#include "../support/redis_topology.h"
#include "../support/test_util.h"
#include "../support/tls_server.h"
#include "edgelock/cluster.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/sentinel.h"

namespace edgelock {
namespace {

int cycles() {
  const char* s = std::getenv("EDGELOCK_ZERO_HEAP_CYCLES");
  return s ? std::atoi(s) : 10000;
}

int small_cycles() { return cycles() / 10 > 0 ? cycles() / 10 : 1; }

void count_event(const Event& e, void* ctx) { *static_cast<int*>(ctx) += e.status.ok() ? 1 : 2; }

TEST(ZeroHeap, ReentrantLockCycles) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a, b;
  ASSERT_TRUE(test::open(a, server.url()));
  ASSERT_TRUE(test::open(b, server.url()));
  ReentrantLock mine(a), other(b);
  ASSERT_TRUE(mine.init(Bytes::from_cstr("zh-reentrant"), {}, Bytes::from_cstr("me")).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("zh-reentrant")).ok());
  ASSERT_TRUE(mine.try_acquire().ok());
  ASSERT_EQ(other.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(mine.extend(Millis(5000)).ok());
  ASSERT_TRUE(mine.release().ok());
  int hook_calls = 0;
  a.set_event_hook(count_event, &hook_calls);
  const int n = small_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !mine.acquire(Millis(1000)).ok();
    failures += !mine.try_acquire().ok();
    failures += !mine.try_acquire().ok();
    failures += other.try_acquire().code() != ErrorCode::kBusy;
    failures += !mine.renew().ok();
    failures += !mine.release().ok();
    failures += !mine.release().ok();
    failures += !mine.release().ok();
    failures += mine.release().code() != ErrorCode::kNotHeld;
  }
  const test::AllocCounts c = test::stop_counting();
  a.set_event_hook(nullptr, nullptr);
  EXPECT_EQ(failures, 0);
  EXPECT_GT(hook_calls, 0);
  EXPECT_EQ(a.stats().connects, 1u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " news=" << c.news << " over " << n;
}

// FairLock: grant, busy (queued and not), extend, ownership, status,
// release, a give-up (leave), and the wait path: two handles alternate
// through the queue (BLPOP on the wake list with the attempt pipelined,
// the release naming the next waiter), and a release whose head was not
// named (the wake script).
TEST(ZeroHeap, FairLockCycles) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a, b;
  ASSERT_TRUE(test::open(a, server.url()));
  ASSERT_TRUE(test::open(b, server.url()));
  FairLock fa(a), fb(b);
  ASSERT_TRUE(fa.init(Bytes::from_cstr("zh-fair")).ok());
  ASSERT_TRUE(fb.init(Bytes::from_cstr("zh-fair")).ok());
  ASSERT_TRUE(fa.try_acquire().ok());
  ASSERT_EQ(fb.acquire(Millis(20)).code(), ErrorCode::kBusy);
  ASSERT_TRUE(fa.release().ok());
  ASSERT_TRUE(fb.try_acquire().ok());
  ASSERT_TRUE(fb.release().ok());
  const int n = small_cycles() / 10 > 0 ? small_cycles() / 10 : 1;
  std::atomic<int> go{0}, wrong{0}, finished{0}, may_exit{0};
  // The thread's own bookkeeping is freed when it ends: it stays alive
  // (idle) until counting has stopped.
  std::thread other([&] {
    while (go.load() == 0) SystemClock().sleep_for(Millis(1));
    for (int i = 0; i < n; ++i) {
      wrong += !fb.acquire(Millis(5000)).ok();
      SystemClock().sleep_for(Millis(1));  // the other waits meanwhile
      wrong += !fb.release().ok();
    }
    finished = 1;
    for (int i = 0; i < 100000 && may_exit.load() == 0; ++i) SystemClock().sleep_for(Millis(1));
  });
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !fa.try_acquire().ok();
    failures += !fa.extend(Millis(5000)).ok();
    const Result<bool> mine = fa.owned();
    failures += !mine.ok() || !mine.value();
    const Result<KeyStatus> st = fa.status();
    failures += !st.ok() || !st.value().held;
    failures += fb.try_acquire().code() != ErrorCode::kBusy;
    // A wait that ends joins and leaves the queue (its BLPOP ends on the
    // server's timer, up to 100 ms late: a few rounds only).
    if (i < 3) failures += fb.acquire(Millis(5)).code() != ErrorCode::kBusy;
    failures += !fa.release().ok();
  }
  go = 1;
  for (int i = 0; i < n; ++i) {
    wrong += !fa.acquire(Millis(5000)).ok();
    wrong += !fa.release().ok();
  }
  for (int i = 0; i < 100000 && finished.load() == 0; ++i) SystemClock().sleep_for(Millis(1));
  const test::AllocCounts c = test::stop_counting();
  may_exit = 1;
  other.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(a.stats().connects, 1u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " news=" << c.news << " over " << n;
}

TEST(ZeroHeap, SemaphoreCycles) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a, b;
  ASSERT_TRUE(test::open(a, server.url()));
  ASSERT_TRUE(test::open(b, server.url()));
  SemaphoreOptions o;
  o.permits = 2;
  Semaphore sa(a), sb(b);
  ASSERT_TRUE(sa.init(Bytes::from_cstr("zh-sem"), o).ok());
  ASSERT_TRUE(sb.init(Bytes::from_cstr("zh-sem"), o).ok());
  Permit p1, p2, p3;
  ASSERT_TRUE(sa.try_acquire(&p1).ok());
  ASSERT_TRUE(p1.extend(Millis(5000)).ok());
  ASSERT_TRUE(sa.in_use().ok());
  ASSERT_TRUE(p1.release().ok());
  ASSERT_EQ(sb.release_id(Bytes::from_cstr("nobody")).code(), ErrorCode::kNotOwner);
  const int n = small_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !sa.acquire(&p1, Millis(1000)).ok();
    failures += !sa.try_acquire(&p2).ok();
    failures += sb.try_acquire(&p3).code() != ErrorCode::kBusy;
    failures += !p1.extend(Millis(5000)).ok();
    const Result<uint32_t> used = sb.in_use();
    failures += !(used.ok() && used.value() == 2);
    failures += !sb.release_id(p2.token()).ok();
    failures += p2.release().code() != ErrorCode::kNotOwner;
    failures += !p1.release().ok();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a.stats().connects, 1u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " news=" << c.news << " over " << n;
}

TEST(ZeroHeap, RateLimiterAndMetrics) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a;
  ASSERT_TRUE(test::open(a, server.url()));
  RateLimiter cd(a), cd_server(a);
  RateLimiterOptions co;
  co.window = Millis(60000);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("zh-cooldown"), co).ok());
  co.local_hint = false;
  ASSERT_TRUE(cd_server.init(Bytes::from_cstr("zh-cooldown"), co).ok());
  RateLimiter q(a);
  RateLimiterOptions qo;
  qo.limit = 2;
  ASSERT_TRUE(q.init(Bytes::from_cstr("zh-quota"), qo).ok());
  ASSERT_TRUE(cd.try_acquire().ok());
  ASSERT_TRUE(cd.erase_on_server().ok());
  ASSERT_TRUE(q.try_acquire().ok());
  ASSERT_TRUE(q.erase_on_server().ok());
  ASSERT_TRUE(cd.peek().ok());
  ASSERT_TRUE(q.peek().ok());
  const int n = small_cycles();
  int failures = 0;
  char line[256];
  Admission adm;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !cd.try_acquire(&adm).ok();
    failures += cd.try_acquire(&adm).code() != ErrorCode::kBusy || !adm.local;
    failures += cd_server.try_acquire(&adm).code() != ErrorCode::kBusy || adm.local;
    failures += cd.acquire(Millis(1), &adm).code() != ErrorCode::kBusy;
    failures += !cd.peek().ok();
    failures += !cd.erase_on_server().ok();
    failures += !q.try_acquire(&adm).ok();
    failures += !q.acquire(Millis(10), &adm).ok();
    failures += q.try_acquire(&adm).code() != ErrorCode::kBusy;
    failures += !q.peek().ok();
    failures += !q.erase_on_server().ok();
    failures += !format_metrics(a.metrics(), line, sizeof line).ok();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a.stats().connects, 1u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " news=" << c.news << " over " << n;
  std::printf("zero-heap primitives: %d cycles; %s\n", n, line);
}

// The contended wait: a waiter blocked in BLPOP is woken by the holder's
// release, over and over. Threads are started before counting begins.
}  // namespace
}  // namespace edgelock
