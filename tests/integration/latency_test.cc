// Locks over an emulated network: real redis-servers behind DelayProxy
// (a fixed one-way delay each way; the kernel here has no netem). Checks
// what only latency shows: the quorum fan-out is parallel, validity counts
// the round trip, a slow server costs at most its timeout, a deadline
// shorter than the round trip times out and the connection recovers, and a
// TTL the round trip eats fails closed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "base/validity.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::DelayProxy;

constexpr const char* kKey = "latency-key";

Nanos slow(Nanos t) { return t * test::slowdown(); }
TimePoint now() { return default_clock().now(); }
// For printing: `d` in ms with fractions.
double ms_of(Nanos d) { return static_cast<double>(d.count()) / 1e6; }
// One-way delay of the emulated network; a round trip is 2 * one_way().
Nanos one_way() { return slow(Millis(20)); }
Nanos rtt() { return 2 * one_way(); }

long expired_keys_of(int port) {
  const std::string info = test::raw_command(port, {"INFO", "stats"});
  const size_t at = info.find("expired_keys:");
  return at == std::string::npos ? -1000000 : std::atol(info.c_str() + at + 13);
}

// N servers, each behind its own proxy; lock connections go through the
// proxies, inspection connections straight to the servers.
class ProxiedServers {
 public:
  bool start(size_t n) {
    n_ = n;
    for (size_t i = 0; i < n; ++i) {
      servers_[i].reset(new test::RedisServer());
      if (!servers_[i]->start()) return false;
      proxies_[i].reset(new DelayProxy(servers_[i]->port(), one_way()));
      if (!proxies_[i]->start()) return false;
      if (!test::open(conns_[i], proxies_[i]->url())) return false;
      if (!test::open(admin_[i], servers_[i]->admin_url())) return false;
      ptrs_[i] = &conns_[i];
    }
    return true;
  }
  Connection* const* conns() { return ptrs_; }
  Connection& conn(size_t i) { return conns_[i]; }
  DelayProxy& proxy(size_t i) { return *proxies_[i]; }
  test::RedisServer& server(size_t i) { return *servers_[i]; }
  std::string get(size_t i) { return test::run(admin_[i], {"GET", kKey}); }
  /// How many servers (but `skip`) hold `token` under the key.
  size_t holders(Bytes token, size_t skip = kMaxQuorumServers) {
    const std::string t(reinterpret_cast<const char*>(token.data), token.size);
    size_t n = 0;
    for (size_t i = 0; i < n_; ++i) n += i != skip && get(i) == t ? 1 : 0;
    return n;
  }
  /// Waits (bounded) until every proxy has delivered what it read.
  bool idle(Nanos limit) {
    for (size_t i = 0; i < n_; ++i) {
      if (!proxies_[i]->wait_idle(limit)) return false;
    }
    return true;
  }
  /// Keys the servers let expire (a lock key that expired was left behind).
  long expired_keys() {
    long n = 0;
    for (size_t i = 0; i < n_; ++i) n += expired_keys_of(servers_[i]->port());
    return n;
  }

 private:
  size_t n_ = 0;
  std::unique_ptr<test::RedisServer> servers_[kMaxQuorumServers];
  std::unique_ptr<DelayProxy> proxies_[kMaxQuorumServers];
  Connection conns_[kMaxQuorumServers];
  Connection admin_[kMaxQuorumServers];
  Connection* ptrs_[kMaxQuorumServers] = {};
};

// A release is decided at its majority: the rest of the servers run it a
// moment later. Bounded poll.
bool released_soon(ProxiedServers& s, Bytes token, size_t skip = kMaxQuorumServers) {
  const TimePoint limit = now() + slow(Millis(1000));
  while (s.holders(token, skip) != 0 && now() < limit) SystemClock().sleep_for(Millis(2));
  return s.holders(token, skip) == 0;
}

QuorumOptions quorum_opts(bool fencing) {
  QuorumOptions o;
  o.ttl = Millis(10000 * test::slowdown());
  o.server_timeout = 5 * rtt();
  o.fencing = fencing;
  return o;
}

Nanos median(Nanos* v, size_t n) {
  std::sort(v, v + n);
  return v[n / 2];
}

// Sequential clients would pay one round trip per server and round (5x);
// a parallel fan-out pays one per round. The bound sits halfway, 2.5x.
void check_parallel(bool fencing) {
  ProxiedServers s;
  ASSERT_TRUE(s.start(5));
  const QuorumOptions o = quorum_opts(fencing);
  QuorumLock lock;
  ASSERT_TRUE(lock.init(s.conns(), 5, Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.acquire(slow(Millis(2000))).ok()) << lock.last_error();  // connects
  ASSERT_TRUE(lock.release().ok());
  // One round with or without fencing: the counters are in step, so a
  // majority returns the fence and no write-back is needed.
  const int rounds = 1;
  const Nanos drift = detail::drift_of(o.ttl, o.drift_factor);
  constexpr size_t kCycles = 5;
  Nanos acquire[kCycles], release[kCycles];
  for (size_t i = 0; i < kCycles; ++i) {
    const TimePoint t0 = now();
    ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
    const TimePoint t1 = now();
    const Nanos left = lock.remaining();
    const TimePoint t2 = now();
    acquire[i] = t1 - t0;
    // Validity runs from before the first request left (>= t0) and at
    // least `rounds` round trips went by before the grant was known.
    EXPECT_LE(left, o.ttl - drift - rounds * rtt()) << "validity must count the round trips";
    EXPECT_GE(left, o.ttl - drift - (t2 - t0));
    // Decided at three grants: the other two land a moment later.
    for (int k = 0; k < 500 && s.holders(lock.token()) != 5; ++k)
      SystemClock().sleep_for(Millis(2));
    EXPECT_EQ(s.holders(lock.token()), 5u);
    const TimePoint t3 = now();
    ASSERT_TRUE(lock.release().ok());
    release[i] = now() - t3;
    EXPECT_TRUE(released_soon(s, lock.token()));
  }
  const Nanos acq = median(acquire, kCycles), rel = median(release, kCycles);
  std::printf(
      "[latency] 5 servers, %lld ms each way, fencing %s: acquire p50 %.1f ms (%lld rounds), "
      "release p50 %.1f ms\n",
      static_cast<long long>(test::ms(one_way())), fencing ? "on" : "off", ms_of(acq),
      static_cast<long long>(rounds), ms_of(rel));
  EXPECT_GE(acq, rounds * rtt()) << "the proxy must delay";
  EXPECT_LT(acq, rounds * rtt() * 5 / 2)
      << "a sequential fan-out would take " << 5 * rounds << " round trips";
  EXPECT_GE(rel, rtt());
  EXPECT_LT(rel, rtt() * 5 / 2);
}

TEST(Latency, QuorumFanOutIsParallel) { check_parallel(false); }
TEST(Latency, QuorumFanOutIsParallelWithFencing) { check_parallel(true); }

// One of five servers turns slower than the per-server timeout mid-run:
// the other four decide, the call returns within that timeout, and the
// slow server's key is removed once it answers again.
TEST(Latency, OneSlowServerCostsAtMostItsTimeout) {
  ProxiedServers s;
  ASSERT_TRUE(s.start(5));
  QuorumOptions o = quorum_opts(true);
  o.server_timeout = 4 * rtt();
  QuorumLock lock;
  ASSERT_TRUE(lock.init(s.conns(), 5, Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.acquire(slow(Millis(2000))).ok()) << lock.last_error();
  ASSERT_TRUE(lock.release().ok());
  const Nanos slow_way = o.server_timeout;  // round trip 2x the timeout
  s.proxy(4).set_delay(slow_way);
  TimePoint t0 = now();
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  const Nanos took = now() - t0;
  const Nanos margin = slow(Millis(50));
  // The acquire round is decided by the four (1 RTT), which agree on the
  // fence: no write-back round.
  EXPECT_LT(took, o.server_timeout + margin);
  EXPECT_GE(s.holders(lock.token()), 3u);
  EXPECT_GE(lock.remaining(), o.ttl / 2);
  const std::string token(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  EXPECT_NE(s.get(4), token) << "the slow server's SET is still on its way";
  t0 = now();
  const Status r = lock.release();
  EXPECT_LT(now() - t0, o.server_timeout + margin);
  // The slow server's SET may still be on its way: the outcome there is unknown.
  EXPECT_TRUE(r.ok() || r.code() == ErrorCode::kIndeterminate) << r.to_string();
  std::printf("[latency] one slow server: acquire %.1f ms (timeout %.0f ms), first release: %s\n",
              ms_of(took), ms_of(o.server_timeout), r.to_string());
  EXPECT_TRUE(released_soon(s, lock.token(), 4)) << "released on the four";
  // The network heals; the retried release reaches the slow server after
  // its delayed SET (same connection, in order, or after it landed).
  s.proxy(4).set_delay(one_way());
  ASSERT_TRUE(s.proxy(4).wait_idle(slow(Millis(3000)))) << "the delayed requests landed";
  for (int i = 0; i < 5 && r.code() == ErrorCode::kIndeterminate; ++i) {
    const Status again = lock.release();
    if (again.code() != ErrorCode::kIndeterminate) {
      EXPECT_TRUE(again.ok()) << again.to_string() << " " << lock.last_error();
      break;
    }
  }
  EXPECT_TRUE(released_soon(s, lock.token())) << "nothing left behind";
}

// A budget shorter than the round trip times out on time; the next call
// reconnects and cleans up the grant that landed after we gave up.
TEST(Latency, SingleLockDeadlineShorterThanRoundTrip) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  DelayProxy proxy(server.port(), one_way());
  ASSERT_TRUE(proxy.start());
  const Nanos budget = 4 * rtt();  // the first EVALSHA costs 2 (NOSCRIPT, EVAL)
  ConnectionOptions co;
  co.command_timeout = budget;
  co.reconnect_min = Millis(1);
  co.reconnect_max = Millis(10);
  Connection conn, admin;
  ASSERT_TRUE(conn.init(proxy.url().c_str(), co).ok());
  ASSERT_TRUE(test::open(admin, server.admin_url()));
  Lock lock(conn);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey)).ok());
  TimePoint t0 = now();
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  EXPECT_GE(now() - t0, rtt()) << "the proxy must delay";
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(proxy.accepted(), 1);

  proxy.set_delay(budget);  // round trip = 2x the budget
  t0 = now();
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kTimeout);
  const Nanos took = now() - t0;
  EXPECT_GE(took, budget);
  EXPECT_LT(took, budget + slow(Millis(50)));
  EXPECT_FALSE(lock.held());
  EXPECT_FALSE(conn.is_connected())
      << "a timed-out connection is closed (its reply may still come)";
  // A plain command with an explicit deadline below the round trip, too.
  proxy.set_delay(one_way());
  const Bytes ping = Bytes::from_cstr("PING");
  t0 = now();
  EXPECT_EQ(conn.command({&ping, 1}, Deadline::after(conn.clock(), one_way())).status().code(),
            ErrorCode::kTimeout);
  EXPECT_LT(now() - t0, one_way() + slow(Millis(50)));

  // Once the late SET has landed, release() reconnects and removes it.
  ASSERT_TRUE(proxy.wait_idle(slow(Millis(3000))));
  const std::string token(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  EXPECT_EQ(test::run(admin, {"GET", kKey}), token) << "the timed-out SET was applied";
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string() << " " << lock.last_error();
  EXPECT_EQ(test::run(admin, {"GET", kKey}), "(nil)");
  EXPECT_EQ(proxy.accepted(), 3)
      << "each timeout closed the connection; each next call reconnected";
  t0 = now();
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  EXPECT_LT(now() - t0, budget);
  ASSERT_TRUE(lock.release().ok());
}

// The validity budget (TTL - drift) is just under one round trip: every
// grant arrives too late to use, so the acquire fails closed and takes its
// keys back. A control with room for the round trips succeeds (and loads
// the scripts, so the clean-up round costs one round trip, not two).
TEST(Latency, TtlEatenByTheRoundTripFailsClosed) {
  ProxiedServers s;
  ASSERT_TRUE(s.start(5));
  QuorumOptions c = quorum_opts(true);
  c.drift_factor = 0.5;                           // drift = ttl / 2 + 2 ms
  c.ttl = std::chrono::floor<Millis>(8 * rtt());  // validity budget 4 rtt - 2 ms
  c.server_timeout = 3 * rtt();
  {
    QuorumLock control;
    ASSERT_TRUE(control.init(s.conns(), 5, Bytes::from_cstr(kKey), c).ok());
    ASSERT_TRUE(control.acquire(slow(Millis(2000))).ok()) << control.last_error();
    EXPECT_GT(control.remaining(), Nanos::zero());
    ASSERT_TRUE(control.release().ok());
  }
  QuorumOptions o = c;
  o.ttl = std::chrono::floor<Millis>(2 * rtt());  // validity budget = rtt - 2 ms
  o.server_timeout = o.ttl - Millis(1);
  QuorumLock lock;
  ASSERT_TRUE(lock.init(s.conns(), 5, Bytes::from_cstr(kKey), o).ok());
  const long expired_before = s.expired_keys();
  const TimePoint t0 = now();
  const Status st = lock.try_acquire();
  const Nanos took = now() - t0;
  EXPECT_TRUE(st.code() == ErrorCode::kExpired || st.code() == ErrorCode::kIndeterminate ||
              st.code() == ErrorCode::kNoQuorum)
      << st.to_string();
  std::printf("[latency] validity budget %.0f ms < rtt %.0f ms: %s after %.1f ms\n",
              ms_of(o.ttl - detail::drift_of(o.ttl, o.drift_factor)), ms_of(rtt()), st.to_string(),
              ms_of(took));
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  EXPECT_EQ(lock.fence(), 0u);
  // Gave up when the validity ran out, then the clean-up round.
  EXPECT_LT(took, o.ttl + o.server_timeout + slow(Millis(50)));
  const Status r = lock.release();
  EXPECT_EQ(r.code(), ErrorCode::kNotHeld) << "the clean-up round reached every server";
  ASSERT_TRUE(s.idle(slow(Millis(3000))));
  EXPECT_EQ(s.holders(lock.token()), 0u) << "nothing left behind";
  // Deleted, not expired: no key outlived the call to die by its TTL.
  SystemClock().sleep_for(2 * o.ttl);
  EXPECT_EQ(s.expired_keys(), expired_before) << "a key was left to expire";
}

}  // namespace
}  // namespace edgelock

namespace edgelock {
namespace {

// Handoff over the emulated network: the release reaches the server one
// way after the call, and the waiter's BLPOP reply a second one way later.
// With the acquire pipelined behind the BLPOP the grant comes with it (about
// one round trip from the release call); a waiter whose TTL is too short to
// pipeline needs one more round trip for its acquire (the control).
Nanos handoff_through_proxy(int64_t waiter_ttl_ms, uint32_t* waiter_commands) {
  test::RedisServer server;
  if (!server.start()) return Nanos(-1);
  DelayProxy proxy(server.port(), one_way());
  if (!proxy.start()) return Nanos(-1);
  Connection holder_conn, waiter_conn;
  if (!test::open(holder_conn, proxy.url()) || !test::open(waiter_conn, proxy.url()))
    return Nanos(-1);
  LockOptions lo;
  lo.ttl = Millis(30000 * test::slowdown());
  Lock holder(holder_conn), waiter(waiter_conn);
  if (!holder.init(Bytes::from_cstr(kKey), lo).ok()) return Nanos(-1);
  lo.ttl = Millis(waiter_ttl_ms);
  // BLPOP caps of 2.5-5 s (scaled): the waiter stays blocked until the release.
  lo.wake_fallback = slow(Millis(5000));
  if (!waiter.init(Bytes::from_cstr(kKey), lo).ok()) return Nanos(-1);
  // Load the scripts on the server first (NOSCRIPT would add round trips).
  if (!waiter.try_acquire().ok() || !waiter.release().ok()) return Nanos(-1);
  if (!holder.try_acquire().ok()) return Nanos(-1);
  std::atomic<TimePoint> granted_at{TimePoint()};
  const uint32_t before = waiter_conn.stats().commands;
  std::thread t([&] {
    if (waiter.acquire(slow(Millis(5000))).ok()) granted_at = now();
  });
  // The waiter's busy attempt (1 round trip), then it blocks in BLPOP.
  default_clock().sleep_for(3 * rtt());
  const TimePoint released_at = now();
  const bool released = holder.release().ok();
  t.join();
  *waiter_commands = waiter_conn.stats().commands - before;
  if (!released || granted_at.load() == TimePoint() || !waiter.release().ok()) return Nanos(-1);
  return granted_at.load() - released_at;
}

TEST(Latency, HandoffPipelinesTheAcquireBehindTheWakeUp) {
  uint32_t commands = 0;
  const Nanos pipelined = handoff_through_proxy(30000 * test::slowdown(), &commands);
  ASSERT_GT(pipelined, Nanos::zero()) << "set-up or handoff failed";
  EXPECT_EQ(commands, 3u) << "busy attempt, then BLPOP + acquire in one write";
  // Floor: one round trip (release there, wake-up and grant back).
  EXPECT_GE(pipelined, rtt() - slow(Millis(2)));
  EXPECT_LT(pipelined, rtt() + one_way()) << "the grant rode along with the wake-up";
  // Control: a 9 s TTL cannot pipeline a BLPOP capped at >= 2.5 s (scaled).
  const Nanos two_step = handoff_through_proxy(9000 * test::slowdown(), &commands);
  ASSERT_GT(two_step, Nanos::zero()) << "set-up or handoff failed";
  EXPECT_EQ(commands, 3u) << "busy attempt, BLPOP, acquire";
  EXPECT_GE(two_step, 2 * rtt() - slow(Millis(2)))
      << "the control needs its own acquire round trip";
  std::printf("latency: handoff with %lld ms each way: pipelined %lld ms, two-step %lld ms\n",
              static_cast<long long>(test::ms(one_way())),
              static_cast<long long>(test::ms(pipelined)),
              static_cast<long long>(test::ms(two_step)));
}

}  // namespace
}  // namespace edgelock
