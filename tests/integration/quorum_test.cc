// Quorum lock against 3 and 5 real redis-servers: all up, minorities and
// majorities killed, a SIGSTOPped server, a restart, partial grants.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "../support/fake_clock.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "quorum/quorum_math.h"

namespace edgelock {
namespace {

using test::run;

constexpr const char* kKey = "gateway-modem";

Nanos elapsed_since(TimePoint t0) { return default_clock().now() - t0; }
Nanos slow(Nanos t) { return t * test::slowdown(); }

// N servers, a lock connection and an inspection connection to each.
class Cluster {
 public:
  explicit Cluster(size_t n, Clock* clock = nullptr) : n_(n), clock_(clock) {}
  bool start() {
    for (size_t i = 0; i < n_; ++i) {
      servers_[i].reset(new test::RedisServer());
      if (!servers_[i]->start()) return false;
      if (!test::open(conns_[i], servers_[i]->url(), clock_)) return false;
      if (!test::open(admin_[i], servers_[i]->admin_url())) return false;
      ptrs_[i] = &conns_[i];
    }
    return true;
  }
  test::RedisServer& server(size_t i) { return *servers_[i]; }
  Connection* const* conns() { return ptrs_; }
  size_t size() const { return n_; }
  std::string get(size_t i, const char* key = kKey) { return run(admin_[i], {"GET", key}); }
  std::string cmd(size_t i, std::initializer_list<std::string> args) {
    return run(admin_[i], args);
  }
  /// How many servers (but `skip`) hold `token` under the key.
  size_t holders(Bytes token, size_t skip = kMaxQuorumServers) {
    const std::string t(reinterpret_cast<const char*>(token.data), token.size);
    size_t n = 0;
    for (size_t i = 0; i < n_; ++i) n += i != skip && get(i) == t ? 1 : 0;
    return n;
  }

 private:
  size_t n_;
  Clock* clock_;
  std::unique_ptr<test::RedisServer> servers_[kMaxQuorumServers];
  Connection conns_[kMaxQuorumServers];
  Connection admin_[kMaxQuorumServers];
  Connection* ptrs_[kMaxQuorumServers] = {};
};

QuorumOptions opts(int64_t ttl_ms = 5000) {
  QuorumOptions o;
  o.ttl = Millis(ttl_ms * test::slowdown());
  o.server_timeout = slow(Millis(100));
  o.retry_min = Millis(2);
  o.retry_max = Millis(20);
  return o;
}

TEST(QuorumLock, InitValidates) {
  Connection a, b;
  ASSERT_TRUE(a.init("redis://127.0.0.1:1").ok());
  ASSERT_TRUE(b.init("redis://127.0.0.1:2").ok());
  Connection* two[2] = {&a, &b};
  Connection* dup[2] = {&a, &a};
  QuorumLock q;
  const Bytes key = Bytes::from_cstr("k");
  EXPECT_EQ(q.init(two, 0, key).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(q.init(two, kMaxQuorumServers + 1, key).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(q.init(dup, 2, key).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(q.init(two, 2, Bytes()).code(), ErrorCode::kInvalidArgument);
  QuorumOptions o;
  o.ttl = Millis(2);  // no validity left after the 2 ms drift allowance
  EXPECT_EQ(q.init(two, 2, key, o).code(), ErrorCode::kInvalidArgument);
  o = QuorumOptions();
  o.server_timeout = o.ttl;
  EXPECT_EQ(q.init(two, 2, key, o).code(), ErrorCode::kInvalidArgument);
  o = QuorumOptions();
  o.retry_max = kMaxTtl + Nanos(1);
  EXPECT_EQ(q.init(two, 2, key, o).code(), ErrorCode::kInvalidArgument);
  o = QuorumOptions();
  o.down_max = kMaxTtl + Nanos(1);
  EXPECT_EQ(q.init(two, 2, key, o).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(q.try_acquire().code(), ErrorCode::kInvalidArgument) << "not initialised";
  o.down_max = kMaxTtl;
  o.retry_max = kMaxTtl;
  EXPECT_TRUE(q.init(two, 2, key, o).ok());
  ASSERT_TRUE(q.init(two, 2, key).ok());
  EXPECT_EQ(q.quorum(), 2u);
  EXPECT_EQ(q.server_timeout(), Millis(200)) << "default: ttl / 50";
  EXPECT_EQ(q.release().code(), ErrorCode::kNotHeld);
}

// A release is decided at its majority: the last server runs it a moment
// later. Bounded poll.
bool released_soon(Cluster& c, Bytes token) {
  const TimePoint limit = default_clock().now() + slow(Millis(500));
  while (c.holders(token) != 0 && default_clock().now() < limit) SystemClock().sleep_for(Millis(2));
  return c.holders(token) == 0;
}

void full_cycle(Cluster& c) {
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), c.size(), Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  EXPECT_TRUE(lock.held());
  EXPECT_GT(lock.fence(), 0u);
  const Nanos max_validity = opts().ttl - detail::drift_of(opts().ttl, 0.01);
  EXPECT_LE(lock.remaining(), max_validity);
  EXPECT_GT(lock.remaining(), max_validity - slow(Millis(200)));
  EXPECT_GE(c.holders(lock.token()), lock.quorum());
  ASSERT_TRUE(lock.extend(Millis(5000)).ok());
  EXPECT_GT(lock.remaining(), max_validity);
  const Result<bool> own = lock.owned();
  ASSERT_TRUE(own.ok());
  EXPECT_TRUE(own.value());
  ASSERT_TRUE(lock.renew().ok());
  EXPECT_GT(lock.remaining(), max_validity) << "a renewal never shortens the lease";
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kInvalidArgument) << "already holding";
  const Bytes token = lock.token();
  ASSERT_TRUE(lock.release().ok());
  EXPECT_FALSE(lock.held());
  EXPECT_TRUE(released_soon(c, token));
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld);
  EXPECT_EQ(lock.extend(Millis(100)).code(), ErrorCode::kNotHeld);
}

// The quorum lock's rounds are not counted: the server connections'
// counters stay at zero through grants, refusals and lost leases (a
// connection counts only its reconnects).
TEST(QuorumLock, RoundsAreNotCountedOnTheServerConnections) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), c.size(), Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  ASSERT_TRUE(lock.extend(Millis(5000)).ok());
  ASSERT_TRUE(lock.release().ok());
  for (size_t i = 0; i < c.size(); ++i) c.cmd(i, {"SET", kKey, "someone", "PX", "60000"});
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kBusy);
  for (size_t i = 0; i < c.size(); ++i) c.cmd(i, {"DEL", kKey});
  ASSERT_TRUE(lock.try_acquire().ok());
  for (size_t i = 0; i < c.size(); ++i) c.cmd(i, {"SET", kKey, "someone", "PX", "60000"});
  EXPECT_EQ(lock.extend(Millis(5000)).code(), ErrorCode::kNotOwner);
  for (size_t i = 0; i < c.size(); ++i) {
    const Metrics& m = c.conns()[i]->metrics();
    EXPECT_EQ(m.attempts + m.grants + m.busy + m.not_owner + m.lost_leases + m.errors, 0u) << i;
  }
}

TEST(QuorumLock, ThreeServersCycle) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  full_cycle(c);
}

TEST(QuorumLock, FiveServersBusyGuardAndFences) {
  Cluster c(5);
  ASSERT_TRUE(c.start());
  full_cycle(c);
  Connection others[5];
  Connection* ptrs[5];
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(test::open(others[i], c.server(i).url()));
    ptrs[i] = &others[i];
  }
  QuorumLock a, b;
  ASSERT_TRUE(a.init(c.conns(), 5, Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(b.init(ptrs, 5, Bytes::from_cstr(kKey), opts()).ok());
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    {
      ASSERT_TRUE(a.acquire(Millis(1000)).ok());
      LockGuard guard(a);
      EXPECT_GT(a.fence(), last);
      last = a.fence();
      EXPECT_EQ(b.try_acquire().code(), ErrorCode::kBusy);
      EXPECT_GT(b.busy_ttl(), Millis(0));
      EXPECT_EQ(c.holders(b.token()), 0u) << "no partial grant left behind";
    }
    EXPECT_TRUE(released_soon(c, a.token())) << "the guard released it";
    ASSERT_TRUE(b.try_acquire().ok());
    EXPECT_GT(b.fence(), last);
    last = b.fence();
    ASSERT_TRUE(b.release().ok());
  }
}

TEST(QuorumLock, PartialGrantsAreCleanedUp) {
  Cluster c(5);
  ASSERT_TRUE(c.start());
  // Another holder on servers 0-2: servers 3 and 4 grant, the majority refuses.
  for (size_t i = 0; i < 3; ++i)
    ASSERT_EQ(c.cmd(i, {"SET", kKey, "someone-else", "PX", "10000"}), "OK");
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 5, Bytes::from_cstr(kKey), opts()).ok());
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(c.holders(lock.token()), 0u);
  EXPECT_EQ(c.get(3), "(nil)");
  EXPECT_EQ(c.get(0), "someone-else") << "the other holder's keys are left alone";
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld) << "nothing left to release";
  // Two servers down and one refusing: a single grant, cleaned up again.
  c.server(0).kill9();
  c.server(1).kill9();
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kNoQuorum);
  EXPECT_EQ(c.holders(lock.token()), 0u);
  EXPECT_EQ(c.get(3), "(nil)");
}

// Holders whose TTL in ns would overflow (Redis takes centuries) still
// leave the backoff between attempts, not a busy loop.
TEST(QuorumLock, HoldersWithACenturiesTtlGetTheBackoff) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(c.cmd(i, {"SET", kKey, "someone-else", "PX", "9000000000000000"}), "OK");
  }
  QuorumOptions o = opts();
  o.retry_min = Millis(10);
  o.retry_max = Millis(20);
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 3, Bytes::from_cstr(kKey), o).ok());
  uint64_t before = 0;
  for (size_t i = 0; i < 3; ++i) before += c.conns()[i]->stats().commands;
  EXPECT_EQ(lock.acquire(Millis(200)).code(), ErrorCode::kBusy);
  uint64_t sent = 0;
  for (size_t i = 0; i < 3; ++i) sent += c.conns()[i]->stats().commands;
  EXPECT_LE(sent - before, 3u * 25u) << "attempts 10 ms or more apart";
}

TEST(QuorumLock, MinorityKilledStillWorks) {
  Cluster c(5);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 5, Bytes::from_cstr(kKey), opts()).ok());
  for (size_t killed = 1; killed <= 2; ++killed) {
    c.server(killed - 1).kill9();
    const TimePoint t0 = default_clock().now();
    ASSERT_TRUE(lock.try_acquire().ok()) << killed << " killed: " << lock.last_error();
    EXPECT_LT(elapsed_since(t0), slow(Millis(100)));
    EXPECT_TRUE(lock.server_down(killed - 1));
    EXPECT_GE(c.holders(lock.token()), lock.quorum());
    ASSERT_TRUE(lock.extend(Millis(1000)).ok());
    const Result<bool> own = lock.owned();
    ASSERT_TRUE(own.ok() && own.value());
    ASSERT_TRUE(lock.release().ok());
    EXPECT_TRUE(released_soon(c, lock.token()));
  }
}

TEST(QuorumLock, MajorityKilledFailsWithNoQuorumInTime) {
  Cluster c(5);
  ASSERT_TRUE(c.start());
  for (size_t i = 0; i < 3; ++i) c.server(i).kill9();
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 5, Bytes::from_cstr(kKey), opts()).ok());
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kNoQuorum);
  const Nanos wait = slow(Millis(300));
  const TimePoint t0 = default_clock().now();
  EXPECT_EQ(lock.acquire(wait).code(), ErrorCode::kNoQuorum);
  const Nanos took = elapsed_since(t0);
  EXPECT_GE(took, wait);
  EXPECT_LT(took, wait + 2 * lock.server_timeout() + slow(Millis(100)));
  EXPECT_EQ(c.holders(lock.token()), 0u);
  EXPECT_FALSE(lock.held());
}

TEST(QuorumLock, StoppedServerCostsAtMostItsTimeout) {
  Cluster c(5);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 5, Bytes::from_cstr(kKey), opts()).ok());
  // Generous for a loaded 2-core CI box; the point is "not N timeouts".
  const Nanos margin = slow(Millis(150));
  // Warm up: scripts cached, so server 0 runs our EVALSHA when it resumes.
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());
  c.server(0).pause();
  TimePoint t0 = default_clock().now();
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_LT(elapsed_since(t0), lock.server_timeout() + margin) << "decided by the other four";
  t0 = default_clock().now();
  // Server 0 got the SET and never answered: it may hold the key, but four
  // of five released it: that is a release.
  const Status s = lock.release();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_GE(lock.released_on(), 3u) << "decided at its majority";
  EXPECT_LT(elapsed_since(t0), lock.server_timeout() + margin);
  const TimePoint soon = default_clock().now() + slow(Millis(500));
  while (c.holders(lock.token(), 0) != 0 && default_clock().now() < soon) {
    SystemClock().sleep_for(Millis(5));
  }
  EXPECT_EQ(c.holders(lock.token(), 0), 0u) << "server 0 is paused, the rest released";
  c.server(0).resume();
  // The release queued behind the SET runs right after it on resume.
  const TimePoint limit = default_clock().now() + slow(Millis(500));
  while (c.get(0) != "(nil)" && default_clock().now() < limit) SystemClock().sleep_for(Millis(5));
  EXPECT_EQ(c.get(0), "(nil)");
}

TEST(QuorumLock, StoppedAndKilledLeaveTheOutcomeUnknown) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 3, Bytes::from_cstr(kKey), opts()).ok());
  c.server(1).kill9();
  c.server(2).pause();
  const TimePoint t0 = default_clock().now();
  // One grant, one refused connect, one silent: only waiting could decide.
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kIndeterminate);
  // The acquire round and the clean-up round each wait for server 2 once.
  EXPECT_LT(elapsed_since(t0), 2 * lock.server_timeout() + slow(Millis(80)));
  EXPECT_EQ(c.get(0), "(nil)") << "the partial grant on server 0 was released";
  c.server(2).resume();
}

TEST(QuorumLock, ServerRestartedBetweenAcquireAndExtend) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 3, Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  const uint64_t first = lock.fence();
  ASSERT_TRUE(c.server(1).restart());  // no persistence: key and counter gone
  ASSERT_TRUE(lock.extend(Millis(3000)).ok()) << lock.last_error();
  EXPECT_TRUE(lock.held());
  const Result<bool> own = lock.owned();
  ASSERT_TRUE(own.ok() && own.value());
  EXPECT_EQ(c.holders(lock.token()), 2u);
  ASSERT_TRUE(lock.release().ok());
  EXPECT_TRUE(released_soon(c, lock.token()));
  SystemClock().sleep_for(2 * opts().down_min);  // let server 1 out of its backoff
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_GT(lock.fence(), first) << "the majority's counters carry the order";
  EXPECT_GE(c.holders(lock.token()), 2u);
  EXPECT_FALSE(lock.server_down(1)) << lock.last_error();
  ASSERT_TRUE(lock.release().ok());
}

TEST(QuorumLock, FencesIncreaseAcrossMajoritiesThatShareOneServer) {
  Cluster c(3);
  ASSERT_TRUE(c.start());
  const char* counter = "{gateway-modem}:fence";
  ASSERT_EQ(c.cmd(0, {"SET", counter, "100"}), "OK");  // server 0 is far ahead
  QuorumLock lock;
  ASSERT_TRUE(lock.init(c.conns(), 3, Bytes::from_cstr(kKey), opts()).ok());
  // Only servers 0 and 1 can grant: the fence comes from server 0's counter.
  ASSERT_EQ(c.cmd(2, {"SET", kKey, "someone-else", "PX", "10000"}), "OK");
  ASSERT_TRUE(lock.try_acquire().ok());
  const uint64_t first = lock.fence();
  EXPECT_EQ(first, 101u);
  EXPECT_EQ(c.get(1, counter), "101") << "written back to the other granting server";
  ASSERT_TRUE(lock.release().ok());
  // Next majority {1, 2} shares only server 1 with the first: without the
  // write-back its counter would say 2 and the fence would go backwards.
  ASSERT_EQ(c.cmd(2, {"DEL", kKey}), "1");
  ASSERT_EQ(c.cmd(0, {"SET", kKey, "someone-else", "PX", "10000"}), "OK");
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_GT(lock.fence(), first);
  ASSERT_TRUE(lock.release().ok());
}

TEST(QuorumLock, ValidityOnAFakeClock) {
  FakeClock clock;
  Cluster c(3, &clock);
  ASSERT_TRUE(c.start());
  QuorumLock lock;
  QuorumOptions o = opts();
  o.ttl = Millis(10000);
  ASSERT_TRUE(lock.init(c.conns(), 3, Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  // The fake clock did not move during the round: elapsed = 0.
  EXPECT_EQ(lock.remaining(), Millis(10000) - detail::drift_of(Millis(10000), o.drift_factor));
  clock.advance(lock.remaining() - Nanos(1));
  EXPECT_TRUE(lock.held());
  clock.advance(Nanos(1));
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.extend(Millis(1000)).code(), ErrorCode::kExpired)
      << "no validity left to extend in";
  EXPECT_TRUE(lock.release().ok()) << "the servers' keys are still there (real TTL)";
  EXPECT_TRUE(released_soon(c, lock.token()));
}

}  // namespace
}  // namespace edgelock
