// Locks through Redis Sentinel with real servers: a primary, a replica and
// three sentinels. Failover by SENTINEL FAILOVER and by kill -9; WAIT with
// the replica stopped.
#include <gtest/gtest.h>

#include <string>

#include "../support/backend_checks.h"
#include "../support/redis_topology.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

class SentinelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(setup_.start()) << "could not start primary, replica and sentinels";
    conn_.connect_timeout = Millis(500) * test::slowdown();
    conn_.command_timeout = Millis(2000) * test::slowdown();
    conn_.reconnect_min = Millis(1);
    conn_.reconnect_max = Millis(10);
    opts_.wait_replicas = 1;
    opts_.wait_timeout = Millis(300) * test::slowdown();
    opts_.recheck_interval = Millis(100);
    opts_.retry_pause = Millis(20);
  }
  Status start(Sentinel& s) { return s.init(setup_.url().c_str(), conn_, opts_); }
  // Asks through `lock` until `s` has moved to the promoted replica (bounded).
  bool follow_failover(Sentinel& s, Lock& lock) {
    const TimePoint t0 = s.clock().now();
    const Nanos limit = Millis(10000) * test::slowdown();
    for (int i = 0; i < 1000 && s.clock().now() - t0 < limit; ++i) {
      lock.owned().status().ignore();
      if (s.primary().endpoint().port == setup_.replica().port()) return true;
      SystemClock().sleep_for(Millis(20));
    }
    return false;
  }

  test::SentinelSetup setup_;
  ConnectionOptions conn_;
  SentinelOptions opts_;
};

TEST_F(SentinelTest, FindsPrimaryAndConfirmsWithReplica) {
  setup_.sentinel(0).kill9();  // the first sentinel listed is down: ask the next
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok()) << sentinel.last_error();
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.primary().port());
  // WAIT made sure the replica has the grant before it was reported.
  Connection replica;
  ASSERT_TRUE(test::open(replica, setup_.replica().url()));
  EXPECT_EQ(run(replica, {"GET", "gate"}),
            std::string(reinterpret_cast<const char*>(lock.token().data), 32));
  ASSERT_TRUE(lock.extend(Millis(1000)).ok());
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(sentinel.stats().wait_failures, 0u);
}

TEST_F(SentinelTest, AuthenticatesToSentinelsWithPassword) {
  test::RedisServer guarded({"--sentinel"});
  ASSERT_TRUE(guarded.set_config(std::string("sentinel monitor ") + test::SentinelSetup::kMaster +
                                 " 127.0.0.1 " + std::to_string(setup_.primary().port()) +
                                 " 1\nrequirepass s3cret\n"));
  ASSERT_TRUE(guarded.start());
  const std::string url = "redis-sentinel://127.0.0.1:" + std::to_string(guarded.port()) + "/" +
                          test::SentinelSetup::kMaster;
  conn_.command_timeout = Millis(300) * test::slowdown();
  Sentinel without;
  ASSERT_TRUE(without.init(url.c_str(), conn_, opts_).ok());
  Lock refused(without);
  ASSERT_TRUE(refused.init(Bytes::from_cstr("gate")).ok());
  EXPECT_EQ(refused.try_acquire().code(), ErrorCode::kNoAuth) << without.last_error();
  Sentinel with;
  opts_.sentinel_password = "s3cret";
  ASSERT_TRUE(with.init(url.c_str(), conn_, opts_).ok());
  Lock lock(with);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << with.last_error();
  EXPECT_EQ(with.primary().endpoint().port, setup_.primary().port());
  ASSERT_TRUE(lock.release().ok());
}

TEST_F(SentinelTest, WaitFailsWithReplicaStopped) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << sentinel.last_error();
  setup_.replica().pause();  // SIGSTOP: connected, but acknowledges nothing
  EXPECT_EQ(lock.extend(Millis(1000)).code(), ErrorCode::kNoQuorum) << sentinel.last_error();
  EXPECT_TRUE(lock.release().ok());
  Lock other(sentinel);
  ASSERT_TRUE(other.init(Bytes::from_cstr("valve")).ok());
  const TimePoint t0 = sentinel.clock().now();
  EXPECT_EQ(other.acquire(Millis(500)).code(), ErrorCode::kNoQuorum)
      << "no retry: it would fail the same";
  EXPECT_LT(sentinel.clock().now() - t0, Millis(1500) * test::slowdown());
  EXPECT_FALSE(other.held());
  Connection primary;
  ASSERT_TRUE(test::open(primary, setup_.primary().url()));
  EXPECT_EQ(run(primary, {"EXISTS", "valve"}), "0") << "an unconfirmed grant is handed back";
  EXPECT_GE(sentinel.stats().wait_failures, 2u);
  setup_.replica().resume();
  EXPECT_TRUE(other.acquire(Millis(2000)).ok()) << sentinel.last_error();
  EXPECT_TRUE(other.release().ok());
}

TEST_F(SentinelTest, FollowsManualFailover) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << sentinel.last_error();
  const uint64_t fence = lock.fence();
  // A second client that only looks again after an error (no rechecks).
  Sentinel lazy;
  opts_.recheck_interval = Nanos::zero();
  opts_.wait_replicas = 0;
  ASSERT_TRUE(start(lazy).ok());
  Lock lazy_lock(lazy);
  ASSERT_TRUE(lazy_lock.init(Bytes::from_cstr("hatch")).ok());
  ASSERT_TRUE(lazy_lock.try_acquire().ok()) << lazy.last_error();
  ASSERT_EQ(setup_.failover(), "+OK\r\n");
  // The client moves over within the deadline. The grant was confirmed by
  // the replica, so the lock is still ours on the new primary.
  const TimePoint t0 = sentinel.clock().now();
  const Nanos limit = Millis(10000) * test::slowdown();
  bool moved = false, owned = false;
  for (int i = 0; i < 1000 && !moved && sentinel.clock().now() - t0 < limit; ++i) {
    const Result<bool> r = lock.owned();
    owned = r.ok() && r.value();
    moved = sentinel.primary().endpoint().port == setup_.replica().port();
    if (!moved) SystemClock().sleep_for(Millis(20));
  }
  const Nanos took = sentinel.clock().now() - t0;
  ASSERT_TRUE(moved) << sentinel.last_error();
  EXPECT_TRUE(owned) << "a WAIT-confirmed grant survives the failover";
  EXPECT_GE(sentinel.stats().primary_changes, 1u);
  std::printf("sentinel: manual failover followed in %lld ms\n",
              static_cast<long long>(test::ms(took)));
  // The new primary has no replica yet (the old one is demoted seconds
  // later): WAIT fails closed instead of reporting an unprotected lease.
  EXPECT_EQ(lock.extend(Millis(2000)).code(), ErrorCode::kNoQuorum);
  ASSERT_TRUE(lock.release().ok()) << sentinel.last_error();
  // Demote the old primary now (Sentinel would, seconds later): the lazy
  // client gets READONLY there, looks the primary up again and retries.
  EXPECT_EQ(lazy.primary().endpoint().port, setup_.primary().port());
  EXPECT_EQ(test::raw_command(setup_.primary().port(),
                              {"REPLICAOF", "127.0.0.1", std::to_string(setup_.replica().port())}),
            "+OK\r\n");
  EXPECT_TRUE(lazy_lock.extend(Millis(2000)).ok()) << lazy.last_error();
  EXPECT_GE(lazy.stats().readonly, 1u);
  EXPECT_EQ(lazy.primary().endpoint().port, setup_.replica().port());
  EXPECT_TRUE(lazy_lock.release().ok());
  // The fencing counter came along: the next grant's fence is higher.
  Sentinel plain;
  ASSERT_TRUE(start(plain).ok());
  Lock next(plain);
  ASSERT_TRUE(next.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(next.try_acquire().ok()) << plain.last_error();
  EXPECT_EQ(plain.primary().endpoint().port, setup_.replica().port());
  EXPECT_GT(next.fence(), fence);
  ASSERT_TRUE(next.release().ok());
}

TEST_F(SentinelTest, FollowsFailoverAfterKill9) {
  Sentinel sentinel;
  opts_.wait_replicas = 0;  // after the kill there is no replica left to confirm
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << sentinel.last_error();
  ASSERT_TRUE(lock.release().ok());
  setup_.primary().kill9();
  const TimePoint t0 = sentinel.clock().now();
  const Status s = lock.acquire(Millis(15000) * test::slowdown());
  const Nanos took = sentinel.clock().now() - t0;
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.replica().port());
  EXPECT_EQ(test::raw_command(setup_.replica().port(), {"ROLE"}).rfind("*3\r\n$6\r\nmaster", 0), 0u)
      << "the promoted replica is a primary";
  std::printf("sentinel: kill -9 failover followed in %lld ms\n",
              static_cast<long long>(test::ms(took)));
  ASSERT_TRUE(lock.release().ok());
  // Every other primitive runs on the promoted replica too.
  Sentinel other;
  ASSERT_TRUE(start(other).ok());
  test::check_every_primitive(sentinel, other, "after-kill");
  EXPECT_EQ(other.primary().endpoint().port, setup_.replica().port());
}

// Grant, busy, extend, renew and release of every primitive, two clients,
// every grant confirmed by the replica (WAIT, also for the array replies of
// the semaphore, reentrant lock and rate limiter).
TEST_F(SentinelTest, EveryPrimitiveThroughSentinel) {
  Sentinel mine, theirs;
  ASSERT_TRUE(start(mine).ok());
  ASSERT_TRUE(start(theirs).ok());
  test::check_every_primitive(mine, theirs, "s");
  EXPECT_EQ(mine.primary().endpoint().port, setup_.primary().port());
  EXPECT_EQ(mine.stats().wait_failures, 0u);
  EXPECT_EQ(theirs.stats().wait_failures, 0u);
}

// With the replica stopped, no grant of any primitive is reported: WAIT
// fails closed and what landed on the primary is handed back or cleaned up.
TEST_F(SentinelTest, EveryPrimitiveWaitsForItsReplica) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  ReentrantLock reentrant(sentinel);
  Semaphore sem(sentinel);
  RateLimiter cooldown(sentinel);
  RateLimiter quota(sentinel);
  // The unconfirmed level must still be on the server when release() runs
  // after four WAIT timeouts: under qemu those take seconds.
  ReentrantLockOptions ro;
  ro.ttl = Millis(10000) * test::slowdown();
  ASSERT_TRUE(reentrant.init(Bytes::from_cstr("r"), ro).ok());
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem")).ok());
  ASSERT_TRUE(cooldown.init(Bytes::from_cstr("cd")).ok());
  ASSERT_TRUE(quota.init(Bytes::from_cstr("q")).ok());
  ASSERT_TRUE(reentrant.try_acquire().ok()) << sentinel.last_error();  // connects
  ASSERT_TRUE(reentrant.release().ok());
  setup_.replica().pause();  // SIGSTOP: connected, but acknowledges nothing
  EXPECT_EQ(reentrant.try_acquire().code(), ErrorCode::kNoQuorum) << sentinel.last_error();
  EXPECT_FALSE(reentrant.held());
  EXPECT_EQ(reentrant.depth(), 0u);
  Permit p;
  EXPECT_EQ(sem.try_acquire(&p).code(), ErrorCode::kNoQuorum) << sentinel.last_error();
  EXPECT_FALSE(p.held());
  EXPECT_EQ(cooldown.try_acquire().code(), ErrorCode::kNoQuorum) << sentinel.last_error();
  EXPECT_EQ(quota.try_acquire().code(), ErrorCode::kNoQuorum) << sentinel.last_error();
  EXPECT_GE(sentinel.stats().wait_failures, 4u);
  Connection primary;
  ASSERT_TRUE(test::open(primary, setup_.primary().url()));
  EXPECT_EQ(run(primary, {"ZCARD", "sem"}), "0") << "an unconfirmed permit is handed back";
  EXPECT_TRUE(reentrant.release().ok()) << "the unconfirmed level is cleaned up";
  EXPECT_EQ(run(primary, {"EXISTS", "r"}), "0");
  setup_.replica().resume();
  EXPECT_TRUE(reentrant.acquire(Millis(2000)).ok()) << sentinel.last_error();
  EXPECT_TRUE(sem.acquire(&p, Millis(2000)).ok()) << sentinel.last_error();
  EXPECT_TRUE(reentrant.release().ok());
  EXPECT_TRUE(p.release().ok());
}

// Every primitive's WAIT-confirmed state survives SENTINEL FAILOVER, and
// the clients follow the new primary.
TEST_F(SentinelTest, EveryPrimitiveFollowsManualFailover) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ReentrantLock reentrant(sentinel);
  Semaphore sem(sentinel);
  RateLimiter cooldown(sentinel);
  RateLimiter quota(sentinel);
  RateLimiterOptions co;
  co.local_hint = false;
  RateLimiterOptions qo;
  qo.local_hint = false;
  ASSERT_TRUE(lock.init(Bytes::from_cstr("l")).ok());
  ASSERT_TRUE(reentrant.init(Bytes::from_cstr("r")).ok());
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem")).ok());
  ASSERT_TRUE(cooldown.init(Bytes::from_cstr("cd"), co).ok());
  ASSERT_TRUE(quota.init(Bytes::from_cstr("q"), qo).ok());
  Permit permit;
  ASSERT_TRUE(lock.try_acquire().ok()) << sentinel.last_error();
  ASSERT_TRUE(reentrant.try_acquire().ok()) << sentinel.last_error();
  ASSERT_TRUE(sem.try_acquire(&permit).ok()) << sentinel.last_error();
  ASSERT_TRUE(cooldown.try_acquire().ok()) << sentinel.last_error();
  ASSERT_TRUE(quota.try_acquire().ok()) << sentinel.last_error();
  ASSERT_EQ(setup_.failover(), "+OK\r\n");
  ASSERT_TRUE(follow_failover(sentinel, lock)) << sentinel.last_error();
  // A client that comes after the failover finds every grant on the new
  // primary: each was confirmed by the replica before it was reported.
  Sentinel later;
  opts_.wait_replicas = 0;  // the new primary has no replica yet
  ASSERT_TRUE(start(later).ok());
  Lock l2(later);
  ReentrantLock r2(later);
  Semaphore s2(later);
  RateLimiter c2(later);
  RateLimiter q2(later);
  ASSERT_TRUE(l2.init(Bytes::from_cstr("l")).ok());
  ASSERT_TRUE(r2.init(Bytes::from_cstr("r")).ok());
  ASSERT_TRUE(s2.init(Bytes::from_cstr("sem")).ok());
  ASSERT_TRUE(c2.init(Bytes::from_cstr("cd"), co).ok());
  ASSERT_TRUE(q2.init(Bytes::from_cstr("q"), qo).ok());
  Permit p2;
  EXPECT_EQ(l2.try_acquire().code(), ErrorCode::kBusy) << later.last_error();
  EXPECT_EQ(later.primary().endpoint().port, setup_.replica().port());
  EXPECT_EQ(r2.try_acquire().code(), ErrorCode::kBusy) << later.last_error();
  EXPECT_EQ(s2.try_acquire(&p2).code(), ErrorCode::kBusy) << later.last_error();
  EXPECT_EQ(c2.try_acquire().code(), ErrorCode::kBusy) << later.last_error();
  EXPECT_EQ(q2.try_acquire().code(), ErrorCode::kBusy) << later.last_error();
  // The first client's releases land on the new primary.
  EXPECT_TRUE(lock.release().ok()) << sentinel.last_error();
  EXPECT_TRUE(reentrant.release().ok()) << sentinel.last_error();
  EXPECT_TRUE(permit.release().ok()) << sentinel.last_error();
  EXPECT_TRUE(cooldown.erase_on_server().ok()) << sentinel.last_error();
  EXPECT_TRUE(quota.erase_on_server().ok()) << sentinel.last_error();
  EXPECT_TRUE(l2.try_acquire().ok()) << later.last_error();
  EXPECT_TRUE(r2.try_acquire().ok()) << later.last_error();
  EXPECT_TRUE(s2.try_acquire(&p2).ok()) << later.last_error();
  EXPECT_TRUE(c2.try_acquire().ok()) << later.last_error();
  EXPECT_TRUE(q2.try_acquire().ok()) << later.last_error();
  EXPECT_TRUE(l2.release().ok());
  EXPECT_TRUE(r2.release().ok());
  EXPECT_TRUE(p2.release().ok());
}

}  // namespace
}  // namespace edgelock
