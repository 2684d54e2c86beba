// No heap after init: thousands of lock cycles against a real server with
// every allocation in the process counted (hiredis included).
#include <gtest/gtest.h>
#include <poll.h>

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

TEST(ZeroHeap, CountsAreReal) {
  // The counter must see an allocation, or the real test proves nothing.
  test::start_counting();
  void* volatile p = std::malloc(16);
  std::free(p);
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(c.mallocs, 1u);
  EXPECT_EQ(c.frees, 1u);
}

TEST(ZeroHeap, SingleInstanceCycles) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection conn;
  ASSERT_TRUE(test::open(conn, server.url()));
  Lock lock(conn);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("zero-heap")).ok());
  // Set-up: connect, and one cycle so every script is cached on the server.
  ASSERT_TRUE(conn.connect().ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());

  const int n = cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !lock.acquire(Millis(1000)).ok();
    failures += !lock.extend(Millis(5000)).ok();
    failures += !lock.renew().ok();
    const Result<bool> owned = lock.owned();
    failures += !(owned.ok() && owned.value());
    failures += !lock.status().ok();
    failures += !lock.release().ok();
    failures += lock.try_acquire().ok() ? !lock.release().ok() : 1;
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(conn.stats().connects, 1u) << "no reconnect happened in the loop";
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news
                           << " over " << n << " cycles";
  std::printf("zero-heap: %d cycles, %u commands, %llu allocations\n", n, conn.stats().commands,
              static_cast<unsigned long long>(c.total()));
}

TEST(ZeroHeap, BusyAndNotOwnerPathsToo) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a, b;
  ASSERT_TRUE(test::open(a, server.url()));
  ASSERT_TRUE(test::open(b, server.url()));
  Lock la(a), lb(b);
  ASSERT_TRUE(la.init(Bytes::from_cstr("contended")).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("contended")).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  ASSERT_EQ(lb.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(la.release().ok());
  int wrong = 0;
  test::start_counting();
  for (int i = 0; i < 1000; ++i) {
    wrong += !la.try_acquire().ok();
    wrong += lb.try_acquire().code() != ErrorCode::kBusy;
    wrong += lb.adopt(Bytes::from_cstr("not-the-token")).ok() ? 0 : 1;
    wrong += lb.release().code() != ErrorCode::kNotOwner;
    wrong += !la.release().ok();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(c.total(), 0u);
}

// Cycles for the router tests (each cycle is several round trips per lock).
TEST(ZeroHeap, ContendedWaitPath) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a, b;
  ASSERT_TRUE(test::open(a, server.url()));
  ASSERT_TRUE(test::open(b, server.url()));
  Lock la(a), lb(b);
  ASSERT_TRUE(la.init(Bytes::from_cstr("wait-path")).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("wait-path")).ok());
  // Warm up: connect both, cache the scripts.
  ASSERT_TRUE(la.try_acquire().ok());
  ASSERT_TRUE(la.release().ok());
  ASSERT_TRUE(lb.try_acquire().ok());
  ASSERT_TRUE(lb.release().ok());
  constexpr int kRounds = 200;
  // The thread's own bookkeeping is freed when it ends, so it stays alive
  // (idle) until counting has stopped.
  // Rounds go in turn: the holder takes the key (held = its round + 1)
  // and keeps it 2 ms, so the waiter, starting only then, finds it busy
  // and waits for the release, whatever the scheduling (qemu included).
  std::atomic<int> go{0}, wrong{0}, finished{0}, may_exit{0}, held{0};
  std::thread holder([&] {
    while (go.load() == 0) SystemClock().sleep_for(Millis(1));
    for (int i = 0; i < kRounds; ++i) {
      wrong += !la.acquire(Millis(5000)).ok();
      held = i + 1;
      SystemClock().sleep_for(Millis(2));  // the waiter blocks meanwhile
      wrong += !la.release().ok();
    }
    finished = 1;
    for (int i = 0; i < 100000 && may_exit.load() == 0; ++i) SystemClock().sleep_for(Millis(1));
  });
  const uint32_t before = b.stats().commands;
  test::start_counting();
  go = 1;
  for (int i = 0; i < kRounds; ++i) {
    for (int k = 0; k < 100000 && held.load() <= i; ++k) SystemClock().sleep_for(Nanos(100000));
    wrong += !lb.acquire(Millis(5000)).ok();
    wrong += !lb.release().ok();
  }
  for (int i = 0; i < 100000 && finished.load() == 0; ++i) SystemClock().sleep_for(Millis(1));
  const test::AllocCounts c = test::stop_counting();
  may_exit = 1;
  holder.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(b.stats().commands - before, static_cast<uint32_t>(2 * kRounds)) << "it did wait";
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news;
}

TEST(ZeroHeap, LeaseKeeperRenewals) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  FakeClock clock;
  Connection conn;
  ASSERT_TRUE(test::open(conn, server.url(), &clock));
  Lock lock(conn);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("kept")).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.renew().ok());  // loads the script
  KeeperOptions ko;
  ko.renew_budget = Millis(1);  // I/O takes no time on the FakeClock
  LeaseKeeper keeper(lock, ko);
  ASSERT_TRUE(keeper.start().ok());
  test::start_counting();
  // Each renewal starts without blocking and is then stepped on its socket
  // in real time (the fake clock stands still meanwhile).
  for (int i = 0; i < 1000 && keeper.state() == LeaseState::kKeeping; ++i) {
    clock.sleep_for(keeper.next_deadline().remaining(clock));
    keeper.step();
    for (int j = 0; j < 100 && keeper.renewing(); ++j) {
      pollfd fds[kMaxWaitFds];
      poll(fds, keeper.wait_fds(fds, kMaxWaitFds), 100);
      keeper.step();
    }
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping);
  EXPECT_EQ(keeper.stats().renewals, 1000u);
  EXPECT_EQ(c.total(), 0u);
}

TEST(ZeroHeap, LeaseKeeperOverQuorumLock) {
  constexpr size_t kServers = 3;
  test::RedisServer servers[kServers];
  Connection conns[kServers];
  Connection* ptrs[kServers];
  for (size_t i = 0; i < kServers; ++i) {
    ASSERT_TRUE(servers[i].start());
    ASSERT_TRUE(test::open(conns[i], servers[i].url()));
    ptrs[i] = &conns[i];
  }
  QuorumOptions o;
  o.server_timeout = Millis(500) * test::slowdown();
  QuorumLock lock;
  ASSERT_TRUE(lock.init(ptrs, kServers, Bytes::from_cstr("kept-quorum"), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.renew().ok());  // loads the script everywhere
  KeeperOptions ko;
  ko.renew_every = Millis(1);  // as fast as the loop goes: many renewals, real clock
  LeaseKeeper keeper(lock, ko);
  ASSERT_TRUE(keeper.start().ok());
  test::start_counting();
  for (int i = 0; i < 2000 && keeper.stats().renewals < 200 && !keeper.lost(); ++i) {
    conns[0].clock().sleep_for(keeper.next_deadline().remaining(conns[0].clock()));
    keeper.step();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping);
  EXPECT_EQ(keeper.stats().renewals, 200u);
  EXPECT_EQ(c.total(), 0u);
  ASSERT_TRUE(lock.release().ok());
}

}  // namespace
}  // namespace edgelock
