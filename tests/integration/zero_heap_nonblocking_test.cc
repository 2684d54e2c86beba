// No heap after init on the non-blocking path: start_*() / wait_fds() /
// next_deadline() / step() of Lock, FairLock, Semaphore, ReentrantLock,
// QuorumLock and RateLimiter, driven by the caller's poll(), with a contended
// acquire woken by a release, a limiter pausing between tries and
// cancelled mid-pause, and LeaseKeeper::step() renewing without
// blocking; and a FairLock over Sentinel, every request routed.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "../support/alloc_counter.h"
#include "../support/redis_server.h"
#include "../support/redis_topology.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace edgelock {
namespace {

int cycles() {
  const char* s = std::getenv("EDGELOCK_ZERO_HEAP_CYCLES");
  const int n = (s ? std::atoi(s) : 10000) / (10 * test::slowdown());
  return n > 0 ? n : 1;
}

// One turn of the caller's loop: poll the operation's descriptors until
// its deadline (at most 100 ms), step it.
template <class Op>
Status drive_one(Op& op, Clock& clock, Status s) {
  pollfd fds[kMaxWaitFds];
  const size_t n = op.wait_fds(fds, kMaxWaitFds);
  int timeout = op.next_deadline().poll_timeout_ms(clock);
  if (timeout < 0 || timeout > 100) timeout = 100;
  poll(fds, n, timeout);
  return s.code() == ErrorCode::kInProgress ? op.step() : s;
}

// The caller's loop, bounded in turns and in time.
template <class Op>
Status drive(Op& op, Clock& clock, Status s) {
  const auto end = std::chrono::steady_clock::now() + Millis(5000) * test::slowdown();
  for (int i = 0; i < 100000 && s.code() == ErrorCode::kInProgress; ++i) {
    if (std::chrono::steady_clock::now() > end) return ErrorCode::kTimeout;
    s = drive_one(op, clock, s);
  }
  return s;
}

class ZeroHeapNonblocking : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ASSERT_TRUE(test::open(a_, server_.url()));
    ASSERT_TRUE(test::open(b_, server_.url()));
  }
  test::RedisServer server_;
  Connection a_, b_;
};

TEST_F(ZeroHeapNonblocking, LockCycles) {
  Lock mine(a_), other(b_);
  ASSERT_TRUE(mine.init(Bytes::from_cstr("zh-nb")).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("zh-nb")).ok());
  Clock& c = a_.clock();
  // Set-up: scripts cached, the wake list's path taken once.
  ASSERT_TRUE(other.try_acquire().ok());
  ASSERT_EQ(drive(mine, c, mine.start_try_acquire()).code(), ErrorCode::kBusy);
  ASSERT_TRUE(other.release().ok());
  ASSERT_TRUE(drive(mine, c, mine.start_acquire(Millis(1000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_extend(Millis(5000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_release()).ok());
  const int n = cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !other.try_acquire().ok();
    // Contended: the acquire is out (then waits on the wake list) when the
    // other holder's release wakes it.
    const Status s = mine.start_acquire(Millis(2000) * test::slowdown());
    failures += s.code() != ErrorCode::kInProgress;
    failures += !other.release().ok();
    failures += !drive(mine, c, s).ok();
    failures += !drive(mine, c, mine.start_renew()).ok();
    failures += !drive(mine, c, mine.start_extend(Millis(5000))).ok();
    failures += !drive(mine, c, mine.start_release()).ok();
    failures += drive(mine, c, mine.start_try_acquire()).ok() ? 0 : 1;
    failures += !drive(mine, c, mine.start_release()).ok();
  }
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a_.stats().connects, 1u);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
}

// FairLock: a contended acquire queues, waits on its wake list and is
// woken by the holder's release; a wait that keeps its place and leave();
// renew, extend, release.
TEST_F(ZeroHeapNonblocking, FairLockCycles) {
  FairLock mine(a_), other(b_);
  ASSERT_TRUE(mine.init(Bytes::from_cstr("zh-nb-fair")).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("zh-nb-fair")).ok());
  Clock& c = a_.clock();
  // Set-up: scripts cached, the wake path taken once.
  ASSERT_TRUE(other.try_acquire().ok());
  ASSERT_EQ(drive(mine, c, mine.start_try_acquire()).code(), ErrorCode::kBusy);
  ASSERT_EQ(drive(mine, c, mine.start_acquire(Millis(5), GiveUp::kStay)).code(), ErrorCode::kBusy);
  ASSERT_TRUE(drive(mine, c, mine.start_leave()).ok());
  ASSERT_TRUE(other.release().ok());
  ASSERT_TRUE(drive(mine, c, mine.start_acquire(Millis(1000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_extend(Millis(5000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_release()).ok());
  const int n = cycles() < 300 ? cycles() : 300;
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !other.try_acquire().ok();
    // Contended: queued (then waiting on its wake list) when the holder's
    // release wakes it.
    const Status s = mine.start_acquire(Millis(2000) * test::slowdown());
    failures += s.code() != ErrorCode::kInProgress;
    failures += !other.release().ok();
    failures += !drive(mine, c, s).ok();
    failures += !drive(mine, c, mine.start_renew()).ok();
    failures += !drive(mine, c, mine.start_extend(Millis(5000))).ok();
    failures += !drive(mine, c, mine.start_release()).ok();
    // A wait that keeps its place (its wake-list wait ends at the server's
    // timer, up to 100 ms: a quarter of the cycles).
    if (i % 4 != 0) continue;
    failures += !other.try_acquire().ok();
    failures +=
        drive(mine, c, mine.start_acquire(Millis(3), GiveUp::kStay)).code() != ErrorCode::kBusy;
    failures += !drive(mine, c, mine.start_leave()).ok();
    failures += !other.release().ok();
  }
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a_.stats().connects, 1u);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
}

// FairLock over Sentinel: the contended cycle with every request routed
// (the join, the BLPOP on the wake list, the grant, the wake) and the
// primary looked up through the sentinels, as steps, before nearly every
// operation.
TEST(ZeroHeapNonblockingRoutes, FairLockSentinelCycles) {
  test::SentinelSetup servers;
  ASSERT_TRUE(servers.start());
  SentinelOptions so;
  so.recheck_interval = Millis(1);
  Sentinel sm, so_other;
  ASSERT_TRUE(sm.init(servers.url().c_str(), {}, so).ok());
  ASSERT_TRUE(so_other.init(servers.url().c_str(), {}, so).ok());
  FairLock mine(sm), other(so_other);
  ASSERT_TRUE(mine.init(Bytes::from_cstr("zh-nb-fair-routed")).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("zh-nb-fair-routed")).ok());
  ASSERT_TRUE(mine.nonblocking());
  Clock& c = sm.clock();
  // Set-up: connections open, scripts cached.
  ASSERT_TRUE(other.try_acquire().ok()) << so_other.last_error();
  ASSERT_EQ(drive(mine, c, mine.start_try_acquire()).code(), ErrorCode::kBusy) << sm.last_error();
  ASSERT_TRUE(other.release().ok());
  ASSERT_TRUE(drive(mine, c, mine.start_acquire(Millis(1000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_extend(Millis(5000))).ok());
  ASSERT_TRUE(drive(mine, c, mine.start_release()).ok());
  const uint32_t resolves = sm.stats().resolves;
  const int n = cycles() < 300 ? cycles() : 300;
  int failures = 0, woken = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !other.try_acquire().ok();
    Status s = mine.start_acquire(Millis(2000) * test::slowdown());
    // Queued (its BLPOP out) before the holder's release wakes it.
    for (int k = 0; k < 1000 && s.code() == ErrorCode::kInProgress && mine.queue_position() == 0;
         ++k) {
      s = drive_one(mine, c, s);
    }
    woken += mine.queue_position() == 1;
    failures += !other.release().ok();
    failures += !drive(mine, c, s).ok();
    failures += !drive(mine, c, mine.start_renew()).ok();
    failures += !drive(mine, c, mine.start_extend(Millis(5000))).ok();
    failures += !drive(mine, c, mine.start_release()).ok();
  }
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0) << sm.last_error();
  EXPECT_EQ(woken, n) << "each acquire queued and was woken";
  EXPECT_GT(sm.stats().resolves, resolves) << "lookups ran inside the counted loop";
  EXPECT_EQ(sm.primary().stats().connects, 1u);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
  std::printf("zero-heap fair sentinel start/step: %d contended cycles, %llu allocations\n", n,
              static_cast<unsigned long long>(counts.total()));
}

TEST_F(ZeroHeapNonblocking, SemaphoreAndReentrantCycles) {
  SemaphoreOptions so;
  so.permits = 1;
  Semaphore sem(a_), full(b_);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("zh-nb-sem"), so).ok());
  ASSERT_TRUE(full.init(Bytes::from_cstr("zh-nb-sem"), so).ok());
  ReentrantLock rl(a_);
  ASSERT_TRUE(rl.init(Bytes::from_cstr("zh-nb-rl"), {}, Bytes::from_cstr("me")).ok());
  Clock& c = a_.clock();
  Permit p, q;
  ASSERT_TRUE(drive(sem, c, sem.start_try_acquire(&p)).ok());
  ASSERT_TRUE(drive(p, c, p.start_renew()).ok());
  ASSERT_TRUE(drive(p, c, p.start_release()).ok());
  ASSERT_TRUE(full.try_acquire(&q).ok());
  ASSERT_EQ(drive(sem, c, sem.start_try_acquire(&p)).code(), ErrorCode::kBusy);
  ASSERT_TRUE(q.release().ok());
  ASSERT_TRUE(drive(rl, c, rl.start_try_acquire()).ok());
  ASSERT_TRUE(drive(rl, c, rl.start_renew()).ok());
  ASSERT_TRUE(drive(rl, c, rl.start_release()).ok());
  const int n = cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !drive(sem, c, sem.start_acquire(&p, Millis(1000))).ok();
    failures += drive(full, c, full.start_try_acquire(&q)).code() != ErrorCode::kBusy;
    failures += !drive(p, c, p.start_renew()).ok();
    failures += !drive(p, c, p.start_release()).ok();
    failures += !drive(rl, c, rl.start_acquire(Millis(1000))).ok();
    failures += !drive(rl, c, rl.start_try_acquire()).ok();  // depth 2
    failures += !drive(rl, c, rl.start_renew()).ok();
    failures += !drive(rl, c, rl.start_release()).ok();
    failures += !drive(rl, c, rl.start_release()).ok();
  }
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
}

// RateLimiter, limit 1 and 2: admitted, refused by the server and by the
// local hint, a wait that pauses between tries until it runs out, and a
// cancel() in the middle of a pause.
TEST_F(ZeroHeapNonblocking, RateLimiterCycles) {
  RateLimiterOptions co;
  co.window = Millis(60000);
  RateLimiter cd(a_), cd_server(b_);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("zh-nb-cd"), co).ok());
  co.local_hint = false;
  ASSERT_TRUE(cd_server.init(Bytes::from_cstr("zh-nb-cd"), co).ok());
  RateLimiterOptions qo;
  qo.limit = 2;
  RateLimiter q(a_);
  ASSERT_TRUE(q.init(Bytes::from_cstr("zh-nb-q"), qo).ok());
  Clock& c = a_.clock();
  Admission adm;
  ASSERT_TRUE(drive(cd, c, cd.start_acquire(Nanos::zero(), &adm)).ok());
  ASSERT_EQ(drive(cd_server, c, cd_server.start_acquire(Millis(2), &adm)).code(), ErrorCode::kBusy);
  ASSERT_TRUE(cd.erase_on_server().ok());
  ASSERT_TRUE(drive(q, c, q.start_acquire(Nanos::zero(), &adm)).ok());
  ASSERT_TRUE(q.erase_on_server().ok());
  const int n = cycles();
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !drive(cd, c, cd.start_acquire(Nanos::zero(), &adm)).ok();
    failures += cd.start_acquire(Nanos::zero(), &adm).code() != ErrorCode::kBusy || !adm.local;
    // Refused by the server, paused, refused again until the wait is over.
    failures +=
        drive(cd_server, c, cd_server.start_acquire(Millis(2), &adm)).code() != ErrorCode::kBusy;
    // Pausing on the local hint, given up.
    failures += cd.start_acquire(Millis(10000), &adm).code() != ErrorCode::kInProgress;
    cd.cancel();
    failures += cd.step().code() != ErrorCode::kInvalidArgument;
    failures += !cd.erase_on_server().ok();
    failures += !drive(q, c, q.start_acquire(Nanos::zero(), &adm)).ok();
    failures += !drive(q, c, q.start_acquire(Millis(10), &adm)).ok();
    failures += drive(q, c, q.start_acquire(Nanos::zero(), &adm)).code() != ErrorCode::kBusy;
    failures += !q.erase_on_server().ok();
  }
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(a_.stats().connects, 1u);
  EXPECT_EQ(b_.stats().connects, 1u);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
}

TEST(ZeroHeapNonblockingQuorum, QuorumCyclesAndKeeper) {
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
  o.server_timeout = Millis(500) * test::slowdown();
  QuorumLock la, lb;
  ASSERT_TRUE(la.init(mine, kServers, Bytes::from_cstr("zh-nb-q"), o).ok());
  ASSERT_TRUE(lb.init(theirs, kServers, Bytes::from_cstr("zh-nb-q"), o).ok());
  Clock& c = conns[0].clock();
  ASSERT_TRUE(drive(la, c, la.start_try_acquire()).ok());
  ASSERT_TRUE(drive(la, c, la.start_renew()).ok());
  ASSERT_EQ(drive(lb, c, lb.start_try_acquire()).code(), ErrorCode::kBusy);
  ASSERT_TRUE(drive(la, c, la.start_release()).ok());
  ASSERT_TRUE(drive(lb, c, lb.start_try_acquire()).ok());
  ASSERT_TRUE(drive(lb, c, lb.start_release()).ok());
  const int n = cycles() / 4 > 0 ? cycles() / 4 : 1;
  int failures = 0;
  test::start_counting();
  for (int i = 0; i < n; ++i) {
    failures += !drive(la, c, la.start_acquire(Millis(1000))).ok();
    failures += la.fence() == 0;
    failures += drive(lb, c, lb.start_try_acquire()).code() != ErrorCode::kBusy;
    failures += !drive(la, c, la.start_extend(Millis(5000))).ok();
    failures += !drive(la, c, la.start_release()).ok();
  }
  // The keeper, renewing without blocking: step() when a socket is
  // ready or the deadline passed.
  failures += !drive(la, c, la.start_try_acquire()).ok();
  KeeperOptions ko;
  ko.renew_every = Millis(1);
  LeaseKeeper keeper(la, ko);
  failures += !keeper.start().ok();
  for (int i = 0; i < 20000 && keeper.stats().renewals < 100 && !keeper.lost(); ++i) {
    pollfd fds[kMaxWaitFds];
    const size_t nfds = keeper.wait_fds(fds, kMaxWaitFds);
    int timeout = keeper.next_deadline().poll_timeout_ms(c);
    if (timeout < 0 || timeout > 100) timeout = 100;
    poll(fds, nfds, timeout);
    keeper.step();
  }
  keeper.stop();
  const test::AllocCounts counts = test::stop_counting();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(keeper.stats().renewals, 100u);
  EXPECT_EQ(counts.total(), 0u) << "mallocs=" << counts.mallocs << " news=" << counts.news;
  ASSERT_TRUE(la.release().ok());
}

}  // namespace
}  // namespace edgelock
