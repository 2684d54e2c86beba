// Timing-edge tests: quorum. Each test drives one timing edge (a late, lost
// or unknown reply, a frozen server) against a real redis-server (through
// test::DelayProxy where a reply must arrive late or be lost) and asserts
// the lease invariant at the moment that edge could break it.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <memory>
#include <string>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

constexpr const char* kKey = "quorum-edge";
constexpr size_t kServers = 3;

TimePoint now() { return default_clock().now(); }
Nanos slow(Nanos t) { return t * test::slowdown(); }

// Three servers, each behind its own DelayProxy (delay 0 until a test sets
// one); the lock talks through the proxies, the inspection connections
// straight to the servers.
class Trio {
 public:
  bool start() {
    for (size_t i = 0; i < kServers; ++i) {
      servers_[i].reset(new test::RedisServer());
      if (!servers_[i]->start()) return false;
      proxies_[i].reset(new test::DelayProxy(servers_[i]->port(), Nanos::zero()));
      if (!proxies_[i]->start()) return false;
      if (!test::open(conns_[i], proxies_[i]->url())) return false;
      if (!test::open(admin_[i], servers_[i]->url())) return false;
      if (!test::open(other_[i], servers_[i]->url())) return false;
      ptrs_[i] = &conns_[i];
      other_ptrs_[i] = &other_[i];
    }
    return true;
  }
  ~Trio() {
    for (size_t i = 0; i < kServers; ++i) {
      if (servers_[i]) servers_[i]->resume();  // a failed assertion may leave one stopped
    }
  }
  test::RedisServer& server(size_t i) { return *servers_[i]; }
  test::DelayProxy& proxy(size_t i) { return *proxies_[i]; }
  Connection& conn(size_t i) { return conns_[i]; }
  Connection* const* conns() { return ptrs_; }
  /// Direct connections for a second client.
  Connection* const* others() { return other_ptrs_; }
  std::string cmd(size_t i, std::initializer_list<std::string> args) {
    return run(admin_[i], args);
  }
  /// Servers whose key holds `token`.
  size_t holders(Bytes token) {
    const std::string t(reinterpret_cast<const char*>(token.data), token.size);
    size_t n = 0;
    for (size_t i = 0; i < kServers; ++i) n += cmd(i, {"GET", kKey}) == t ? 1 : 0;
    return n;
  }
  /// Servers where the key exists at all (PTTL != -2).
  size_t keyed() {
    size_t n = 0;
    for (size_t i = 0; i < kServers; ++i) n += cmd(i, {"PTTL", kKey}) != "-2" ? 1 : 0;
    return n;
  }

 private:
  std::unique_ptr<test::RedisServer> servers_[kServers];
  std::unique_ptr<test::DelayProxy> proxies_[kServers];
  Connection conns_[kServers];
  Connection admin_[kServers];
  Connection other_[kServers];
  Connection* ptrs_[kServers] = {};
  Connection* other_ptrs_[kServers] = {};
};

QuorumOptions opts(int64_t ttl_ms = 5000) {
  QuorumOptions o;
  o.ttl = Millis(ttl_ms * test::slowdown());
  o.server_timeout = slow(Millis(100));
  o.retry_min = Millis(10);
  o.retry_max = Millis(100);
  return o;
}

// Acquire and release once: scripts cached on every server, so a server
// that resumes runs the EVALSHA queued in its socket.
// A release or acquire is decided at its majority: the last server may
// run its request a moment after the call returns. Bounded poll.
template <typename F>
bool soon(F done) {
  const TimePoint limit = now() + slow(Millis(1000));
  while (!done() && now() < limit) SystemClock().sleep_for(Millis(5));
  return done();
}

void warm_up(QuorumLock& lock) {
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  ASSERT_TRUE(lock.release().ok()) << lock.last_error();
}

// A server timeout long enough that waiting for a stalled server shows.
QuorumOptions stalled_opts() {
  QuorumOptions o = opts();
  o.server_timeout = slow(Millis(2000));
  return o;
}

// `lock` holds the key on every server, then server 2 stops (SIGSTOP).
// Straight to the servers: the proxies' forwarding would add stragglers.
void hold_with_one_stalled(Trio& t, QuorumLock& lock, const QuorumOptions& o) {
  ASSERT_TRUE(t.start());
  ASSERT_TRUE(lock.init(t.others(), kServers, Bytes::from_cstr(kKey), o).ok());
  warm_up(lock);
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  t.server(2).pause();
}

// Two of three servers frozen while the acquire is in flight. The
// release must reach them too (queued behind the acquire), so when they
// resume the key is gone long before its TTL.
TEST(QuorumEdges, FailedAcquireLeavesNoKeyOnAFrozenServer) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts(10000)).ok());
  warm_up(lock);
  t.server(1).pause();
  t.server(2).pause();
  const Status s = lock.try_acquire();
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(t.cmd(0, {"PTTL", kKey}), "-2") << "server 0 answered: released at once";
  t.server(1).resume();
  t.server(2).resume();
  // Bounded poll: the resumed servers run acquire then release.
  const TimePoint limit = now() + slow(Millis(500));
  while (t.keyed() > 0 && now() < limit) SystemClock().sleep_for(Millis(5));
  for (size_t i = 0; i < kServers; ++i) {
    EXPECT_EQ(t.cmd(i, {"PTTL", kKey}), "-2")
        << "server " << i << " still holds our key (10 s TTL)";
  }
  // The late replies are drained, not taken for the next request's.
  const TimePoint wait_end = now() + slow(Millis(1000));
  Status again = lock.try_acquire();
  while (!again.ok() && now() < wait_end) {
    SystemClock().sleep_for(Millis(10));
    again = lock.try_acquire();
  }
  ASSERT_TRUE(again.ok()) << again.to_string() << " " << lock.last_error();
  EXPECT_TRUE(soon([&] { return t.holders(lock.token()) == kServers; }));
  ASSERT_TRUE(lock.release().ok());
  EXPECT_TRUE(soon([&] { return t.keyed() == 0; }));
}

// extend(300, kReplace) on a 10 s lease with every reply lost: the outcome
// is unknown, so the validity is cut to what it could have set, and the
// requests, landing late, never cut the servers' leases.
TEST(QuorumEdges, LostShortExtendNeverCutsTheLease) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  // Caches the extend script: the lost EVALSHA must run, not get NOSCRIPT.
  ASSERT_TRUE(lock.extend(Millis(10000 * test::slowdown()), ExtendMode::kReplace).ok());
  const Nanos lost = 3 * lock.server_timeout();  // one way: the round ends first
  for (size_t i = 0; i < kServers; ++i) t.proxy(i).set_delay(lost);
  const TimePoint start = now();
  const int64_t shorter_ms = 300 * test::slowdown();
  const Status s = lock.extend(Millis(shorter_ms), ExtendMode::kReplace);
  EXPECT_FALSE(s.ok()) << "no reply came back in time";
  EXPECT_LE(lock.remaining(), start + Millis(shorter_ms) - now())
      << "still claims the old validity: " << test::ms(lock.remaining()) << " ms";
  for (size_t i = 0; i < kServers; ++i) t.proxy(i).set_delay(Nanos::zero());
  for (size_t i = 0; i < kServers; ++i)
    ASSERT_TRUE(t.proxy(i).wait_idle(lost + slow(Millis(2000))));
  // Every server holding our token still keeps it long (a server whose
  // grant never landed may hold nothing: the majority is what counts).
  const std::string token(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  size_t holding = 0;
  for (size_t i = 0; i < kServers; ++i) {
    if (t.cmd(i, {"GET", kKey}) != token) continue;
    ++holding;
    EXPECT_GT(std::stoll(t.cmd(i, {"PTTL", kKey})), 1000 * test::slowdown())
        << "server " << i << ": the late extend cut the lease";
  }
  EXPECT_GE(holding, lock.quorum());
  QuorumLock other;
  ASSERT_TRUE(other.init(t.others(), kServers, Bytes::from_cstr(kKey), opts(10000)).ok());
  EXPECT_EQ(other.try_acquire().code(), ErrorCode::kBusy);
}

// Ok from extend means validity > 0 afterwards.
TEST(QuorumEdges, ExtendOkOnlyWithValidityLeft) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  // 1 ms is below the 2 ms drift allowance: every server extends (without
  // a TTL there, an extend sets the 1 ms asked; it never cuts one), but no
  // validity can be left.
  // (A straggler's grant may still be on its way: a majority is enough.)
  size_t persisted = 0;
  for (size_t i = 0; i < kServers; ++i) persisted += t.cmd(i, {"PERSIST", kKey}) == "1" ? 1 : 0;
  ASSERT_GE(persisted, lock.quorum());
  const Status s = lock.extend(Millis(1), ExtendMode::kReplace);
  EXPECT_EQ(s.code(), ErrorCode::kExpired) << s.to_string();
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  EXPECT_FALSE(s.ok() && lock.remaining() <= Nanos::zero()) << "ok with no validity";
  EXPECT_NE(lock.release().code(), ErrorCode::kNotHeld) << "the token is kept for clean-up";
}

// A holder without a TTL must not make the waiter poll every 1 ms.
TEST(QuorumEdges, HolderWithoutTtlGetsTheNormalBackoff) {
  Trio t;
  ASSERT_TRUE(t.start());
  for (size_t i = 0; i < kServers; ++i) ASSERT_EQ(t.cmd(i, {"SET", kKey, "forever"}), "OK");
  QuorumLock lock;
  const QuorumOptions o = opts();
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), o).ok());
  const uint32_t before = t.conn(0).stats().commands;
  const Nanos wait = slow(Millis(500));
  EXPECT_EQ(lock.acquire(wait).code(), ErrorCode::kBusy);
  const uint32_t attempts = t.conn(0).stats().commands - before;
  // Every delay is at least retry_min (10 ms): at most wait / retry_min + 1.
  const uint32_t most = static_cast<uint32_t>(wait / o.retry_min) + 2;
  EXPECT_LE(attempts, most) << "polling instead of backing off";
  EXPECT_GE(attempts, 2u);
  EXPECT_EQ(lock.busy_ttl(), Millis(0)) << "no TTL: no bound";
}

// A release whose outcome is unknown on a majority: not held any
// more, but the token stays so release() can be retried.
TEST(QuorumEdges, UnknownReleaseIsNotHeldButKeepsTheToken) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts()).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  t.server(1).pause();
  t.server(2).pause();
  EXPECT_EQ(lock.release().code(), ErrorCode::kIndeterminate);
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  EXPECT_EQ(lock.released_on(), 1u);
  t.server(1).resume();
  t.server(2).resume();
  const Status again = lock.release();
  EXPECT_NE(again.code(), ErrorCode::kNotHeld) << "the token was forgotten";
  EXPECT_TRUE(again.ok() || again.code() == ErrorCode::kNotOwner) << again.to_string();
  EXPECT_TRUE(soon([&] { return t.keyed() == 0; })) << "decided at its majority, then the rest";
}

// Released on two of three servers (the third stalled) is a
// release, reported with how many servers confirmed it.
TEST(QuorumEdges, ReleaseOnAMajorityIsARelease) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts()).ok());
  warm_up(lock);
  // On a loaded machine the warm-up's release may reach a server after its
  // round ended (released on a majority is a release): let it land, so the
  // key checked below can only be this test's.
  const TimePoint settle = now() + slow(Millis(1000));
  while (t.keyed() > 0 && now() < settle) SystemClock().sleep_for(Millis(5));
  ASSERT_EQ(t.keyed(), 0u) << "the warm-up's release never reached a server";
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  const std::string ours(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  t.server(2).pause();
  const Status s = lock.release();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(lock.released_on(), 2u);
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld) << "a release is final";
  t.server(2).resume();
  // The straggler runs the release it was sent.
  const TimePoint limit = now() + slow(Millis(500));
  while (t.keyed() > 0 && now() < limit) SystemClock().sleep_for(Millis(5));
  EXPECT_EQ(t.keyed(), 0u) << "server 2 holds " << t.cmd(2, {"GET", kKey}) << ", ours was " << ours;
}

// A release returns once a majority answered: a stalled server costs it
// nothing, its release stays queued and runs when it resumes, and the next
// acquire reads that late reply before sending its own request.
TEST(QuorumEdges, ReleaseReturnsAtItsMajority) {
  Trio t;
  QuorumLock lock;
  const QuorumOptions o = stalled_opts();
  ASSERT_NO_FATAL_FAILURE(hold_with_one_stalled(t, lock, o));
  const TimePoint t0 = now();
  const Status s = lock.release();
  const Nanos took = now() - t0;
  t.server(2).resume();
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_LT(took, o.server_timeout / 4) << test::ms(took) << " ms: waited for the stalled server";
  EXPECT_TRUE(soon([&] { return t.keyed() == 0; })) << "the straggler's release never ran";
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  EXPECT_TRUE(soon([&] { return t.holders(lock.token()) == kServers; }))
      << "the next acquire lost a server to the late reply";
  ASSERT_TRUE(lock.release().ok());
}

// An ownership check is decided at its majority too, as steps that never
// wait: with one server stopped, start_owned()/step() answers "ours" long
// before that server's timeout. Once the key is gone from a majority, the
// next check says not ours and drops the lease.
TEST(QuorumEdges, OwnershipCheckAnswersAtItsMajorityAndSeesALoss) {
  Trio t;
  QuorumLock lock;
  const QuorumOptions o = stalled_opts();
  ASSERT_NO_FATAL_FAILURE(hold_with_one_stalled(t, lock, o));
  const TimePoint t0 = now();
  Nanos longest{0};
  Status s = lock.start_owned();
  for (int i = 0; i < 100000 && s.code() == ErrorCode::kInProgress; ++i) {
    pollfd fds[kServers] = {};
    const size_t n = lock.wait_fds(fds, kServers);
    const Nanos left = lock.next_deadline().remaining(lock.clock());
    (void)::poll(fds, n, static_cast<int>(std::min<int64_t>(test::ms(left) + 1, 50)));
    const TimePoint s0 = now();
    s = lock.step();
    longest = std::max(longest, now() - s0);
  }
  const Nanos took = now() - t0;
  t.server(2).resume();
  EXPECT_TRUE(s.ok()) << s.to_string() << ": " << lock.last_error();
  EXPECT_TRUE(lock.held());
  EXPECT_LT(took, o.server_timeout / 4) << test::ms(took) << " ms: waited for the stalled server";
  EXPECT_LT(longest, slow(Millis(20))) << test::ms(longest) << " ms in one step";

  ASSERT_EQ(t.cmd(0, {"DEL", kKey}), "1");
  ASSERT_EQ(t.cmd(1, {"DEL", kKey}), "1");
  const Result<bool> own = lock.owned();
  ASSERT_TRUE(own.ok()) << own.status().to_string();
  EXPECT_FALSE(own.value());
  EXPECT_FALSE(lock.held());
  // The token is kept for clean-up: a release takes the last copy back.
  lock.release().ignore();
  EXPECT_TRUE(soon([&] { return t.keyed() == 0; })) << "the straggler's copy stayed";
}

// The waiter's bound is when a majority frees, not the longest
// (nor the shortest) holder TTL. Server 0 is free (it grants, then is
// cleaned up), so one more must expire: the shorter of the other two.
TEST(QuorumEdges, BusyTtlIsWhenAMajorityFrees) {
  Trio t;
  ASSERT_TRUE(t.start());
  const int64_t ms[kServers] = {0, 3000 * test::slowdown(), 5000 * test::slowdown()};
  for (size_t i = 1; i < kServers; ++i) {
    ASSERT_EQ(t.cmd(i, {"SET", kKey, "other", "PX", std::to_string(ms[i])}), "OK");
  }
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts()).ok());
  // Server 0's grant comes first (the others answer 20 ms later), and one
  // grant and one refusal cannot decide: all three replies are read.
  t.proxy(1).set_delay(slow(Millis(10)));
  t.proxy(2).set_delay(slow(Millis(10)));
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_LE(lock.busy_ttl(), Millis(ms[1])) << "a majority is free once server 1's key expires";
  EXPECT_GT(lock.busy_ttl(), Millis(ms[1] - 500));
  EXPECT_EQ(t.cmd(0, {"PTTL", kKey}), "-2") << "the grant on server 0 was cleaned up";
}

// A release with stalled servers (one frozen with a request in flight, one
// frozen idle, one answering late) returns within its one-round budget.
TEST(QuorumEdges, ReleaseWithStalledServersKeepsItsBudget) {
  Trio t;
  ASSERT_TRUE(t.start());
  QuorumLock lock;
  ASSERT_TRUE(lock.init(t.conns(), kServers, Bytes::from_cstr(kKey), opts()).ok());
  warm_up(lock);
  t.server(2).pause();
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();  // 2's acquire in flight
  t.server(1).pause();
  t.proxy(0).set_delay(2 * lock.server_timeout());
  const TimePoint t0 = now();
  EXPECT_EQ(lock.release().code(), ErrorCode::kIndeterminate);
  const Nanos took = now() - t0;
  EXPECT_LT(took, lock.server_timeout() + slow(Millis(50))) << test::ms(took) << " ms";
  t.proxy(0).set_delay(Nanos::zero());
  t.server(1).resume();
  t.server(2).resume();
  const TimePoint limit = now() + slow(Millis(1000));
  while (t.keyed() > 0 && now() < limit) SystemClock().sleep_for(Millis(5));
  EXPECT_EQ(t.keyed(), 0u) << "every server ran the release it was sent";
}

// A release that must reconnect to every server (each dropped our
// connection, then froze: it still accepts, but never answers the AUTH of
// the handshake). Each reconnect and handshake gets what is left of the
// round's one deadline, so the release keeps its budget however many
// servers it reconnects to; server_timeout is long enough for the
// handshake to wait in blocking reads.
TEST(QuorumEdges, ReleaseThatReconnectsKeepsItsBudget) {
  std::unique_ptr<test::RedisServer> servers[kServers];
  Connection conns[kServers];
  Connection admin[kServers];
  Connection* ptrs[kServers] = {};
  for (size_t i = 0; i < kServers; ++i) {
    servers[i].reset(new test::RedisServer({"--requirepass", "pw"}));
    ASSERT_TRUE(servers[i]->start());
    const std::string url = "redis://:pw@127.0.0.1:" + std::to_string(servers[i]->port());
    ASSERT_TRUE(test::open(conns[i], url));
    ASSERT_TRUE(test::open(admin[i], url));
    ptrs[i] = &conns[i];
  }
  QuorumOptions o = opts();
  o.server_timeout = slow(Millis(300));
  QuorumLock lock;
  ASSERT_TRUE(lock.init(ptrs, kServers, Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  for (size_t i = 0; i < kServers; ++i) {
    ASSERT_EQ(run(admin[i], {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}), "1");
    // The server closes a killed client after the event loop turn that
    // answered KILL; the next reply comes after that close.
    ASSERT_EQ(run(admin[i], {"PING"}), "PONG");
    servers[i]->pause();
  }
  // Summed over the servers: the acquire returns once a majority granted,
  // so one connection may still be reading its grant and then finds the
  // close behind it instead of reconnecting.
  auto failures = [&conns] {
    uint32_t n = 0;
    for (const Connection& c : conns) n += c.stats().connect_failures;
    return n;
  };
  const uint32_t tries = failures();
  const TimePoint t0 = now();
  EXPECT_EQ(lock.release().code(), ErrorCode::kIndeterminate);
  const Nanos took = now() - t0;
  for (auto& s : servers) s->resume();
  EXPECT_GT(failures(), tries) << "the release tried to reconnect";
  EXPECT_LT(took, lock.server_timeout() + slow(Millis(50))) << test::ms(took) << " ms";
}

}  // namespace
}  // namespace edgelock
