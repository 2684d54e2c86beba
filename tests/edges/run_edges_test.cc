// Timing-edge regression tests (issue 13): the lease keeper and the
// `edgelock` tool (run must not outlive its lease, bounded exits).
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <thread>

#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"
#include "../integration/cli_fixture.h"
#include "../support/delay_proxy.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::slowdown;

// How late a poll loop may wake after a deadline on a loaded machine.
Nanos loop_slack() { return millis(10) * slowdown(); }

// Runs the keeper's poll loop until it is no longer keeping (bounded).
// Returns the latest instant a service() call returned.
Nanos keep_until_lost(LeaseKeeper& keeper, Clock& clock, Nanos limit) {
  const Nanos stop_at = clock.now() + limit;
  Nanos last_return = 0;
  for (int i = 0; i < 10000 && keeper.state() == LeaseState::kKeeping && clock.now() < stop_at; ++i) {
    poll(nullptr, 0, keeper.next_deadline().poll_timeout_ms(clock));
    keeper.service();
    last_return = clock.now();
  }
  return last_return;
}

bool connect_with(Connection& c, const std::string& url, Nanos command_timeout) {
  ConnectionOptions o;
  o.command_timeout = command_timeout;
  return c.setup(url.c_str(), o).ok() && c.connect().ok();
}

// Item 3: a renewal stalled by a partition made the keeper report the
// loss ~200 ms after another client held the key. Our client's replies
// are lost (proxy delay 10 s); another client tries directly all along.
TEST(RunEdges, KeeperReportsLossByValidityEndUnderPartition) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  test::DelayProxy proxy(server.port(), 0);
  ASSERT_TRUE(proxy.start());
  Connection conn;
  ASSERT_TRUE(connect_with(conn, proxy.url(), millis(250) * slowdown()));
  Clock& clock = conn.clock();
  Lock lock(conn);
  LockOptions lo;
  lo.ttl_ms = 1000 * slowdown();
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok());
  const Nanos end = clock.now() + lock.remaining();
  proxy.set_delay(millis(10000));  // partition: nothing of ours gets through

  std::atomic<Nanos> granted_at{0};
  std::atomic<bool> stop{false};
  std::thread other([&] {
    Connection oc;
    if (!connect_with(oc, server.url(), millis(500) * slowdown())) return;
    Lock ol(oc);
    if (!ol.init(Bytes::from_cstr("modem")).ok()) return;
    for (int i = 0; i < 2000 && !stop.load(); ++i) {
      if (ol.try_acquire().ok()) {
        granted_at.store(clock.now());
        return;
      }
      poll(nullptr, 0, 2);
    }
  });
  const Nanos last_return = keep_until_lost(keeper, clock, millis(5000) * slowdown());
  for (int i = 0; i < 1000 && granted_at.load() == 0; ++i) poll(nullptr, 0, 5);
  stop.store(true);
  other.join();
  ASSERT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_LE(keeper.lost_at(), end + loop_slack()) << "reported after the validity ended";
  EXPECT_LE(last_return, end + loop_slack()) << "the caller's loop was blocked past the validity";
  ASSERT_GT(granted_at.load(), 0) << "the other client never got the key";
  EXPECT_GE(granted_at.load(), keeper.lost_at()) << "another client held the key while we kept it";
}

// Item 13: with the default command timeout (2 s) a 3 s lease on a frozen
// server made the keeper block until after the validity ended.
TEST(RunEdges, KeeperWithDefaultOptionsReportsLossByValidityEnd) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  Connection conn;
  ASSERT_TRUE(conn.setup(server.url().c_str()).ok());  // default ConnectionOptions
  Clock& clock = conn.clock();
  Lock lock(conn);
  LockOptions lo;
  lo.ttl_ms = 3000;
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok()) << "a 3 s lease fits the default 2 s budget";
  // Healthy first: the keeper really keeps it with these options.
  for (int i = 0; i < 100 && keeper.stats().renewals < 2 && !keeper.lost(); ++i) {
    poll(nullptr, 0, keeper.next_deadline().poll_timeout_ms(clock));
    keeper.service();
  }
  ASSERT_EQ(keeper.stats().renewals, 2u);
  const Nanos end = clock.now() + lock.remaining();
  server.pause();
  const Nanos last_return = keep_until_lost(keeper, clock, millis(8000) * slowdown());
  server.resume();
  ASSERT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.last_error().code(), ErrorCode::kExpired);
  EXPECT_LE(keeper.lost_at(), end + loop_slack()) << "reported after the validity ended";
  EXPECT_LE(last_return, end + loop_slack()) << "a renewal overran the validity";

  // A lease too short for even one renewal within the budget is refused.
  Lock short_lock(conn);
  lo.ttl_ms = 2000;
  ASSERT_TRUE(short_lock.init(Bytes::from_cstr("short"), lo).ok());
  ASSERT_TRUE(short_lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper refused(short_lock);
  EXPECT_EQ(refused.start().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.state(), LeaseState::kIdle);
}

}  // namespace
}  // namespace edgelock
