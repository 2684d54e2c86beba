// Locks through Redis Sentinel with real servers: a primary, a replica and
// three sentinels. Failover by SENTINEL FAILOVER and by kill -9; WAIT with
// the replica stopped.
#include <gtest/gtest.h>

#include <string>

#include "edgelock/lock.h"
#include "edgelock/sentinel.h"
#include "../support/redis_topology.h"
#include "../support/test_util.h"

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
  Status start(Sentinel& s) { return s.setup(setup_.url().c_str(), conn_, opts_); }

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
  EXPECT_EQ(run(replica, {"GET", "gate"}), std::string(reinterpret_cast<const char*>(lock.token().data), 32));
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
  ASSERT_TRUE(without.setup(url.c_str(), conn_, opts_).ok());
  Lock refused(without);
  ASSERT_TRUE(refused.init(Bytes::from_cstr("gate")).ok());
  EXPECT_EQ(refused.try_acquire().code(), ErrorCode::kNoAuth) << without.last_error();
  Sentinel with;
  opts_.sentinel_password = "s3cret";
  ASSERT_TRUE(with.setup(url.c_str(), conn_, opts_).ok());
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
  EXPECT_EQ(other.acquire(Millis(500)).code(), ErrorCode::kNoQuorum) << "no retry: it would fail the same";
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
  std::printf("sentinel: manual failover followed in %lld ms\n", static_cast<long long>(test::ms(took)));
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
  std::printf("sentinel: kill -9 failover followed in %lld ms\n", static_cast<long long>(test::ms(took)));
  ASSERT_TRUE(lock.release().ok());
}

}  // namespace
}  // namespace edgelock
