// No heap after init: thousands of lock cycles against a real server with
// every allocation in the process counted (hiredis included).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "edgelock/cluster.h"
#include "edgelock/edgelock.h"
#include "edgelock/fake_clock.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/sentinel.h"
#include "../support/alloc_counter.h"
#include "../support/redis_server.h"
#include "../support/redis_topology.h"
#include "../support/test_util.h"
#include "../support/tls_server.h"

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
    failures += !lock.acquire(millis(1000)).ok();
    failures += !lock.extend(5000).ok();
    failures += !lock.reacquire().ok();
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
int router_cycles() {
  const int n = cycles() / (10 * test::slowdown());
  return n > 0 ? n : 1;
}

// Every steady-state operation of one lock; returns the number of failures.
int lock_cycle(Lock& lock) {
  int failures = 0;
  failures += !lock.acquire(millis(1000)).ok();
  failures += !lock.extend(5000).ok();
  failures += !lock.reacquire().ok();
  const Result<bool> owned = lock.owned();
  failures += !(owned.ok() && owned.value());
  failures += !lock.status().ok();
  failures += !lock.release().ok();
  return failures;
}

TEST(ZeroHeap, ClusterCyclesOnEveryPrimary) {
  test::RedisClusterSetup servers(3);
  ASSERT_TRUE(servers.start());
  Cluster cluster;
  ASSERT_TRUE(cluster.setup(servers.url().c_str()).ok());
  // Set-up: read the slot map and connect every primary.
  ASSERT_TRUE(cluster.refresh(Deadline::after(cluster.clock(), millis(5000))).ok());
  ASSERT_TRUE(cluster.connect_primaries(Deadline::after(cluster.clock(), millis(5000))).ok());
  Lock locks[3] = {Lock(cluster), Lock(cluster), Lock(cluster)};
  const uint16_t slots[3] = {0, 8192, 16383};
  for (int i = 0; i < 3; ++i) {
    std::string key;
    for (int n = 0; n < 100000 && key.empty(); ++n) {
      const std::string k = "zh-" + std::to_string(n);
      if (cluster.owner_of(key_slot(k.c_str())) == cluster.owner_of(slots[i])) key = k;
    }
    ASSERT_TRUE(locks[i].init(Bytes(key.data(), key.size())).ok());
    ASSERT_EQ(lock_cycle(locks[i]), 0) << cluster.last_error();  // scripts cached on each node
  }
  const int n = router_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    for (Lock& l : locks) failures += lock_cycle(l);
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  uint32_t connects = 0;
  for (size_t i = 0; i < cluster.node_count(); ++i) connects += cluster.node(i).stats().connects;
  EXPECT_EQ(connects, 3u) << "one connection per primary, no reconnects";
  EXPECT_EQ(cluster.stats().moved + cluster.stats().ask, 0u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news;
  std::printf("zero-heap cluster: %d cycles x 3 primaries, %llu allocations\n", n,
              static_cast<unsigned long long>(c.total()));
}

TEST(ZeroHeap, SentinelCyclesWithWaitAndRechecks) {
  test::SentinelSetup servers;
  ASSERT_TRUE(servers.start());
  Sentinel sentinel;
  SentinelOptions so;
  so.wait_replicas = 1;            // WAIT after every acquire and extend
  so.recheck_interval = millis(1);  // ask a sentinel before nearly every op
  ASSERT_TRUE(sentinel.setup(servers.url().c_str(), {}, so).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("zero-heap")).ok());
  ASSERT_EQ(lock_cycle(lock), 0) << sentinel.last_error();  // set-up: connects
  const uint32_t resolves = sentinel.stats().resolves;
  const int n = router_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) failures += lock_cycle(lock);
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0) << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().stats().connects, 1u);
  EXPECT_GT(sentinel.stats().resolves, resolves) << "the recheck path ran inside the counted loop";
  EXPECT_EQ(sentinel.stats().wait_failures, 0u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news;
  std::printf("zero-heap sentinel: %d cycles, %u sentinel rechecks, %llu allocations\n", n,
              sentinel.stats().resolves - resolves, static_cast<unsigned long long>(c.total()));
}

TEST(ZeroHeap, QuorumCycles) {
  constexpr size_t kServers = 3;
  test::RedisServer servers[kServers];
  Connection conns[kServers], others[kServers];
  Connection* mine[kServers];
  Connection* theirs[kServers];
  for (size_t i = 0; i < kServers; ++i) {
    ASSERT_TRUE(servers[i].start());
    ASSERT_TRUE(test::open(conns[i], servers[i].url()));
    ASSERT_TRUE(test::open(others[i], servers[i].url()));
    mine[i] = &conns[i];
    theirs[i] = &others[i];
  }
  QuorumOptions o;
  o.server_timeout = millis(500) * test::slowdown();
  QuorumLock la, lb;
  ASSERT_TRUE(la.init(mine, kServers, Bytes::from_cstr("zero-heap-quorum"), o).ok());
  ASSERT_TRUE(lb.init(theirs, kServers, Bytes::from_cstr("zero-heap-quorum"), o).ok());
  // Set-up: every connection connected and every script cached.
  ASSERT_TRUE(la.try_acquire().ok());
  ASSERT_TRUE(la.extend(1000).ok());
  ASSERT_TRUE(la.owned().ok());
  ASSERT_EQ(lb.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(la.release().ok());
  ASSERT_TRUE(lb.try_acquire().ok());
  ASSERT_TRUE(lb.release().ok());

  // Each cycle is ~11 fan-out rounds; fewer under qemu.
  const int n = cycles() / (10 * test::slowdown()) > 0 ? cycles() / (10 * test::slowdown()) : 1;
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !la.acquire(millis(1000)).ok();
    failures += !la.extend(5000).ok();
    failures += !la.reacquire().ok();
    const Result<bool> owned = la.owned();
    failures += !(owned.ok() && owned.value());
    failures += lb.try_acquire().code() != ErrorCode::kBusy;  // busy + clean-up rounds
    failures += !la.release().ok();
    failures += lb.try_acquire().ok() ? !lb.release().ok() : 1;
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  for (size_t i = 0; i < kServers; ++i) {
    EXPECT_EQ(conns[i].stats().connects, 1u) << "no reconnect in the loop, server " << i;
    EXPECT_EQ(others[i].stats().connects, 1u) << "no reconnect in the loop, server " << i;
  }
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news
                           << " over " << n << " quorum cycles";
  std::printf("zero-heap quorum: %d cycles over %zu servers, %llu allocations\n", n, kServers,
              static_cast<unsigned long long>(c.total()));
}

// --- Issue 9 primitives: every steady-state call, granted and refused. ---

int small_cycles() { return cycles() / 10 > 0 ? cycles() / 10 : 1; }

void count_event(const Event& e, void* ctx) {
  *static_cast<int*>(ctx) += e.status.ok() ? 1 : 2;
}

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
  ASSERT_TRUE(mine.extend(5000).ok());
  ASSERT_TRUE(mine.release().ok());
  int hook_calls = 0;
  a.set_event_hook(count_event, &hook_calls);
  const int n = small_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !mine.acquire(millis(1000)).ok();
    failures += !mine.try_acquire().ok();
    failures += !mine.try_acquire().ok();
    failures += other.try_acquire().code() != ErrorCode::kBusy;
    failures += !mine.reacquire().ok();
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
  ASSERT_TRUE(sa.extend(&p1, 5000).ok());
  ASSERT_TRUE(sa.in_use().ok());
  ASSERT_TRUE(sa.release(&p1).ok());
  ASSERT_EQ(sb.release_id(Bytes::from_cstr("nobody")).code(), ErrorCode::kNotOwner);
  const int n = small_cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !sa.acquire(&p1, millis(1000)).ok();
    failures += !sa.try_acquire(&p2).ok();
    failures += sb.try_acquire(&p3).code() != ErrorCode::kBusy;
    failures += !sa.extend(&p1, 5000).ok();
    const Result<uint32_t> used = sb.in_use();
    failures += !(used.ok() && used.value() == 2);
    failures += !sb.release_id(p2.id_bytes()).ok();
    failures += sa.release(&p2).code() != ErrorCode::kNotOwner;
    failures += !sa.release(&p1).ok();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a.stats().connects, 1u);
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " news=" << c.news << " over " << n;
}

TEST(ZeroHeap, CooldownQuotaAndMetrics) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  Connection a;
  ASSERT_TRUE(test::open(a, server.url()));
  Cooldown cd(a), cd_server(a);
  CooldownOptions co;
  co.period_ms = 60000;
  ASSERT_TRUE(cd.init(Bytes::from_cstr("zh-cooldown"), co).ok());
  co.local_hint = false;
  ASSERT_TRUE(cd_server.init(Bytes::from_cstr("zh-cooldown"), co).ok());
  Quota q(a);
  QuotaOptions qo;
  qo.limit = 2;
  ASSERT_TRUE(q.init(Bytes::from_cstr("zh-quota"), qo).ok());
  ASSERT_TRUE(cd.try_enter().ok());
  ASSERT_TRUE(cd.reset().ok());
  ASSERT_TRUE(q.try_take().ok());
  ASSERT_TRUE(q.reset().ok());
  ASSERT_TRUE(cd.retry_after_ms().ok());
  ASSERT_TRUE(q.peek().ok());
  const int n = small_cycles();
  int failures = 0;
  char line[256];
  Admission adm;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !cd.try_enter(&adm).ok();
    failures += cd.try_enter(&adm).code() != ErrorCode::kBusy || !adm.local;
    failures += cd_server.try_enter(&adm).code() != ErrorCode::kBusy || adm.local;
    failures += cd.enter(millis(1), &adm).code() != ErrorCode::kBusy;
    failures += !cd.retry_after_ms().ok();
    failures += !cd.reset().ok();
    failures += !q.try_take(&adm).ok();
    failures += !q.take(millis(10), &adm).ok();
    failures += q.try_take(&adm).code() != ErrorCode::kBusy;
    failures += !q.peek().ok();
    failures += !q.reset().ok();
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
  std::atomic<int> go{0}, wrong{0}, finished{0}, may_exit{0};
  std::thread holder([&] {
    while (go.load() == 0) SystemClock().sleep_for(millis(1));
    for (int i = 0; i < kRounds; ++i) {
      wrong += !la.acquire(millis(5000)).ok();
      SystemClock().sleep_for(millis(1));  // the waiter blocks meanwhile
      wrong += !la.release().ok();
    }
    finished = 1;
    for (int i = 0; i < 100000 && may_exit.load() == 0; ++i) SystemClock().sleep_for(millis(1));
  });
  const uint32_t before = b.stats().commands;
  test::start_counting();
  go = 1;
  for (int i = 0; i < kRounds; ++i) {
    wrong += !lb.acquire(millis(5000)).ok();
    wrong += !lb.release().ok();
  }
  for (int i = 0; i < 100000 && finished.load() == 0; ++i) SystemClock().sleep_for(millis(1));
  const test::AllocCounts c = test::stop_counting();
  may_exit = 1;
  holder.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(b.stats().commands - before, static_cast<uint32_t>(2 * kRounds)) << "it did wait";
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news;
}

#ifdef EDGELOCK_TEST_TLS
// Over TLS: the handshake allocates (setup), the lock cycles must not.
TEST(ZeroHeap, TlsCycles) {
  const test::TestCerts& certs = test::shared_certs();
  ASSERT_TRUE(certs.ok());
  test::TlsRedis server(certs, "server");
  ASSERT_TRUE(server.start());
  const std::string ca = certs.path("ca.crt");
  ConnectionOptions o;
  o.connect_timeout = millis(3000) * test::slowdown();
  o.command_timeout = millis(3000) * test::slowdown();
  o.tls.ca_file = ca.c_str();
  Connection conn;
  ASSERT_TRUE(conn.setup(server.tls_url().c_str(), o).ok());
  Lock lock(conn);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("zero-heap-tls")).ok());

  test::start_counting();
  test::reset_peak();
  const Status connected = conn.connect();
  const uint64_t peak = test::peak_bytes();
  const test::AllocCounts setup = test::stop_counting();
  const int64_t retained = test::live_bytes();
  ASSERT_TRUE(connected.ok()) << conn.last_error();
  EXPECT_GT(setup.mallocs, 0u) << "the counter must see the handshake allocate";
  EXPECT_GE(static_cast<int64_t>(peak), retained);
  std::printf("tls connect+handshake: peak %llu bytes live, "
              "%lld kept after it, %llu allocations, %llu bytes requested in total\n",
              static_cast<unsigned long long>(peak), static_cast<long long>(retained),
              static_cast<unsigned long long>(setup.mallocs),
              static_cast<unsigned long long>(setup.bytes));
  // The same connect without TLS, for comparison.
  Connection plain;
  ASSERT_TRUE(plain.setup(server.plain_url().c_str(), o).ok());
  test::start_counting();
  test::reset_peak();
  ASSERT_TRUE(plain.connect().ok()) << plain.last_error();
  const uint64_t plain_peak = test::peak_bytes();
  const test::AllocCounts plain_setup = test::stop_counting();
  EXPECT_LT(plain_peak, peak);
  std::printf("plaintext connect: peak %llu bytes live, %lld kept, %llu allocations\n",
              static_cast<unsigned long long>(plain_peak),
              static_cast<long long>(test::live_bytes()),
              static_cast<unsigned long long>(plain_setup.mallocs));
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());

  const int n = cycles() / 5;
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !lock.acquire(millis(1000)).ok();
    failures += !lock.extend(5000).ok();
    const Result<bool> owned = lock.owned();
    failures += !(owned.ok() && owned.value());
    failures += !lock.status().ok();
    failures += !lock.release().ok();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(failures, 0) << conn.last_error();
  EXPECT_EQ(conn.stats().connects, 1u) << "no reconnect happened in the loop";
  EXPECT_EQ(c.total(), 0u) << "mallocs=" << c.mallocs << " frees=" << c.frees << " news=" << c.news
                           << " over " << n << " TLS cycles";
  std::printf("zero-heap over TLS: %d cycles, %u commands, %llu allocations\n", n,
              conn.stats().commands, static_cast<unsigned long long>(c.total()));
}
#endif

TEST(ZeroHeap, LeaseKeeperRenewals) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  FakeClock clock;
  Connection conn;
  ASSERT_TRUE(test::open(conn, server.url(), &clock));
  Lock lock(conn);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("kept")).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.reacquire().ok());  // loads the script
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok());
  test::start_counting();
  for (int i = 0; i < 1000 && keeper.state() == LeaseState::kKeeping; ++i) {
    clock.sleep_for(keeper.next_deadline().remaining(clock));
    keeper.service();
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
  o.server_timeout = millis(500) * test::slowdown();
  QuorumLock lock;
  ASSERT_TRUE(lock.init(ptrs, kServers, Bytes::from_cstr("kept-quorum"), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.reacquire().ok());  // loads the script everywhere
  KeeperOptions ko;
  ko.renew_every = millis(1);  // as fast as the loop goes: many renewals, real clock
  LeaseKeeper keeper(lease_target(lock), conns[0].clock(), ko);
  ASSERT_TRUE(keeper.start().ok());
  test::start_counting();
  for (int i = 0; i < 2000 && keeper.stats().renewals < 200 && !keeper.lost(); ++i) {
    conns[0].clock().sleep_for(keeper.next_deadline().remaining(conns[0].clock()));
    keeper.service();
  }
  const test::AllocCounts c = test::stop_counting();
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping);
  EXPECT_EQ(keeper.stats().renewals, 200u);
  EXPECT_EQ(c.total(), 0u);
  ASSERT_TRUE(lock.release().ok());
}

}  // namespace
}  // namespace edgelock
