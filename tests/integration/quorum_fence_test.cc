// One-round quorum fencing (docs/quorum.md, "Fencing across the quorum")
// against 3 and 5 real redis-servers: the fence is final after the acquire
// round when a majority returned it (no write-back is sent), the write-back
// runs when the servers disagreed, fences of successive grants strictly
// increase across alternating clients, a holder abandoned right after a
// one-round grant is followed by a higher fence, and the data-loss rules.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "primitives/lock_scripts.h"

namespace edgelock {
namespace {

using test::run;

constexpr const char* kKey = "pump";
constexpr const char* kCounter = "{pump}:fence";
constexpr const char* kOther = "someone-else";

Nanos slow(Nanos t) { return t * test::slowdown(); }

QuorumOptions opts(int64_t ttl_ms = 5000) {
  QuorumOptions o;
  o.ttl = Millis(ttl_ms * test::slowdown());
  o.server_timeout = slow(Millis(100));
  o.retry_min = Millis(2);
  o.retry_max = Millis(20);
  return o;
}

// N servers and an inspection connection to each.
class Servers {
 public:
  bool start(size_t n, std::vector<std::string> extra = {}) {
    n_ = n;
    for (size_t i = 0; i < n; ++i) {
      servers_[i].reset(new test::RedisServer(extra));
      if (!servers_[i]->start() || !test::open(admin_[i], servers_[i]->admin_url())) return false;
      if (!load_scripts(i)) return false;
    }
    return true;
  }
  /// Loads the quorum lock's scripts, so that no NOSCRIPT re-send adds to
  /// the commands a test counts.
  bool load_scripts(size_t i) {
    for (const Script* sc :
         {&detail::kQuorumAcquireScript, &detail::kFenceRaiseScript, &detail::kReleaseScript}) {
      if (cmd(i, {"SCRIPT", "LOAD", std::string(sc->body, sc->len)}) != sc->sha1) return false;
    }
    return true;
  }
  size_t size() const { return n_; }
  test::RedisServer& server(size_t i) { return *servers_[i]; }
  std::string cmd(size_t i, std::initializer_list<std::string> args) {
    return run(admin_[i], args);
  }
  std::string counter(size_t i) { return cmd(i, {"GET", kCounter}); }
  /// Waits (bounded) until no server holds `token` under the key: a
  /// release is decided at its majority, the rest run it a moment later.
  bool released(Bytes token) {
    const std::string t(reinterpret_cast<const char*>(token.data), token.size);
    for (int i = 0; i < 500; ++i) {
      size_t holders = 0;
      for (size_t j = 0; j < n_; ++j) holders += cmd(j, {"GET", kKey}) == t ? 1 : 0;
      if (holders == 0) return true;
      SystemClock().sleep_for(Millis(2));
    }
    return false;
  }
  uint64_t counter_value(size_t i) {
    const std::string v = counter(i);
    return v == "(nil)" ? 0 : std::strtoull(v.c_str(), nullptr, 10);
  }
  void set_counter(size_t i, uint64_t v) {
    ASSERT_EQ(cmd(i, {"SET", kCounter, std::to_string(v)}), "OK");
  }
  /// Server i refuses grants (another holder) or stops refusing.
  void block(size_t i) { ASSERT_EQ(cmd(i, {"SET", kKey, kOther, "PX", "60000"}), "OK"); }
  void unblock(size_t i) { cmd(i, {"DEL", kKey}); }
  /// kill -9 and start again on the same port and directory.
  bool restart(size_t i) {
    if (!servers_[i]->restart()) return false;
    admin_[i].close();
    return test::open(admin_[i], servers_[i]->admin_url());
  }

 private:
  size_t n_ = 0;
  std::unique_ptr<test::RedisServer> servers_[kMaxQuorumServers];
  Connection admin_[kMaxQuorumServers];
};

// A process of its own: a connection to every server and a QuorumLock.
class Client {
 public:
  bool init(Servers& s, const QuorumOptions& o = opts()) {
    for (size_t i = 0; i < s.size(); ++i) {
      if (!test::open(conns_[i], s.server(i).url())) return false;
      ptrs_[i] = &conns_[i];
    }
    n_ = s.size();
    return lock_.init(ptrs_, n_, Bytes::from_cstr(kKey), o).ok();
  }
  QuorumLock& lock() { return lock_; }
  /// Connects every connection now, so an acquire's requests leave
  /// together (not each after its own connect).
  bool connect() {
    for (size_t i = 0; i < n_; ++i) {
      if (!conns_[i].connect().ok()) return false;
    }
    return true;
  }
  /// Commands sent so far over all connections (NOSCRIPT re-sends count).
  uint64_t commands() const {
    uint64_t n = 0;
    for (size_t i = 0; i < n_; ++i) n += conns_[i].stats().commands;
    return n;
  }
  /// One try_acquire; `sent` = the commands it sent.
  Status acquire(uint64_t* sent) {
    const uint64_t before = commands();
    const Status s = lock_.try_acquire();
    *sent = commands() - before;
    return s;
  }

 private:
  Connection conns_[kMaxQuorumServers];
  Connection* ptrs_[kMaxQuorumServers] = {};
  size_t n_ = 0;
  QuorumLock lock_;
};

// Warm-up: loads the scripts on every server (a NOSCRIPT re-send would
// count as a command).
void warm_up(Client& c) {
  ASSERT_TRUE(c.lock().acquire(slow(Millis(2000))).ok()) << c.lock().last_error();
  ASSERT_TRUE(c.lock().release().ok());
}

// The grant script on one server: max(counter + 1, proposal), the busy
// reply's counter, and all or nothing when the counter cannot be written.
TEST(QuorumFence, GrantScriptTakesTheMaximum) {
  Servers s;
  ASSERT_TRUE(s.start(1));
  const std::string sha = detail::kQuorumAcquireScript.sha1;
  auto grant = [&](const char* token, const char* proposal) {
    return s.cmd(0, {"EVALSHA", sha, "2", kKey, kCounter, token, "60000", proposal});
  };
  EXPECT_EQ(grant("t1", "1"), "1") << "a fresh counter";
  EXPECT_EQ(grant("t1", "1"), "2") << "a same-token re-arm still increments";
  EXPECT_EQ(grant("t1", "40"), "40") << "a proposal ahead of the counter";
  EXPECT_EQ(grant("t1", "7"), "41") << "a proposal behind it";
  const std::string busy = grant("t2", "99");
  EXPECT_EQ(busy.substr(0, 1), "-") << busy;
  EXPECT_EQ(busy.substr(busy.find(' ') + 1), "41") << "busy: the counter, nothing written";
  EXPECT_EQ(s.counter(0), "41");
  s.unblock(0);
  s.set_counter(0, 0);
  ASSERT_EQ(s.cmd(0, {"SET", kCounter, "-5"}), "OK");
  EXPECT_EQ(grant("t3", "3"), "3") << "a negative counter is raised to the proposal";
  s.unblock(0);
  for (const char* bad : {"abc", "1.5", "9223372036854775807"}) {
    ASSERT_EQ(s.cmd(0, {"SET", kCounter, bad}), "OK");
    const std::string r = grant("t4", "2");
    EXPECT_EQ(r.substr(0, 4), "ERR:") << bad << ": " << r;
    EXPECT_NE(r.find("edgelock fence counter"), std::string::npos) << r;
    EXPECT_EQ(s.cmd(0, {"GET", kKey}), "(nil)") << "nothing written with " << bad;
    EXPECT_EQ(s.counter(0), bad);
  }
  ASSERT_EQ(s.cmd(0, {"DEL", kCounter}), "1");
  ASSERT_EQ(s.cmd(0, {"RPUSH", kCounter, "x"}), "1");
  const std::string wrong = grant("t4", "2");
  EXPECT_NE(wrong.find("WRONGTYPE"), std::string::npos) << wrong;
  EXPECT_EQ(s.cmd(0, {"GET", kKey}), "(nil)");
  s.block(0);
  const std::string listed = grant("t4", "2");
  EXPECT_EQ(listed.substr(listed.find(' ') + 1), "0") << "busy over a list counter: " << listed;
}

// A release decided at its majority lands on the stragglers a moment later
// (bounded poll).
bool released_everywhere(Servers& s) {
  const TimePoint limit = default_clock().now() + slow(Millis(1000));
  for (size_t k = 0; k < s.size(); ++k) {
    while (s.cmd(k, {"EXISTS", kKey}) != "0" && default_clock().now() < limit) {
      SystemClock().sleep_for(Millis(2));
    }
    if (s.cmd(k, {"EXISTS", kKey}) != "0") return false;
  }
  return true;
}

TEST(QuorumFence, OneRoundTripWhenAMajorityAgrees) {
  Servers s;
  ASSERT_TRUE(s.start(5));
  Client a, b;
  ASSERT_TRUE(a.init(s) && b.init(s));
  warm_up(a);
  ASSERT_TRUE(released_everywhere(s)) << "the warm-up's release never landed";
  warm_up(b);
  ASSERT_TRUE(released_everywhere(s)) << "the warm-up's release never landed";
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Client& c = i % 2 == 0 ? a : b;  // alternating clients, counters in step
    uint64_t sent = 0;
    ASSERT_TRUE(c.acquire(&sent).ok()) << c.lock().last_error();
    EXPECT_EQ(sent, 5u) << "one acquire per server and no fence write-back";
    EXPECT_GT(c.lock().fence(), last);
    last = c.lock().fence();
    ASSERT_TRUE(c.lock().release().ok());
    // Both rounds were decided at their majority: a straggler runs its
    // requests a moment later (bounded poll). The next client's acquire
    // must not reach a server before this release did there, or that
    // server rightly answers busy and falls out of step.
    for (size_t k = 0; k < 5; ++k) {
      const TimePoint limit = default_clock().now() + slow(Millis(1000));
      while ((s.counter(k) != std::to_string(last) || s.cmd(k, {"EXISTS", kKey}) != "0") &&
             default_clock().now() < limit) {
        SystemClock().sleep_for(Millis(2));
      }
      EXPECT_EQ(s.counter(k), std::to_string(last)) << "server " << k << " is in step";
      EXPECT_EQ(s.cmd(k, {"EXISTS", kKey}), "0") << "server " << k << " ran the release";
    }
  }
}

// Servers whose counters disagree, and a client whose proposal is behind:
// the write-back round raises the servers that returned less, and only them.
TEST(QuorumFence, StaleGuessTakesTwoRoundsAndStaysMonotonic) {
  Servers s;
  ASSERT_TRUE(s.start(3));
  Client a, b, c;
  ASSERT_TRUE(a.init(s) && b.init(s) && c.init(s));
  ASSERT_TRUE(a.connect() && b.connect() && c.connect());
  s.set_counter(0, 50);
  s.set_counter(1, 10);
  s.set_counter(2, 10);
  s.block(2);
  uint64_t sent = 0;
  ASSERT_TRUE(a.acquire(&sent).ok()) << a.lock().last_error();  // proposes 1
  EXPECT_EQ(a.lock().fence(), 51u);
  // Three acquires and one write-back (to server 1); the round is decided
  // by the first two grants, so a refusal still on its way counts as a
  // server that may hold our key and gets the (owner-checked, here
  // ineffective) write-back too.
  EXPECT_GE(sent, 4u);
  EXPECT_LE(sent, 5u);
  EXPECT_EQ(s.counter(1), "51") << "raised while it held our key";
  EXPECT_EQ(s.counter(2), "10") << "a refusing server is not raised";
  ASSERT_TRUE(a.lock().release().ok());
  ASSERT_TRUE(s.released(a.lock().token()));
  // Next majority {1, 2} shares only server 1 with {0, 1}.
  s.unblock(2);
  s.block(0);
  ASSERT_TRUE(b.acquire(&sent).ok()) << b.lock().last_error();  // proposes 1
  EXPECT_EQ(b.lock().fence(), 52u);
  EXPECT_GE(sent, 4u);  // as above
  EXPECT_LE(sent, 5u);
  EXPECT_EQ(s.counter(2), "52");
  ASSERT_TRUE(b.lock().release().ok());
  // A client that has seen 52 proposes 53: the lagging server 0 jumps to it
  // and all three agree in one round.
  s.unblock(0);
  ASSERT_TRUE(b.acquire(&sent).ok()) << b.lock().last_error();
  EXPECT_EQ(b.lock().fence(), 53u);
  EXPECT_EQ(sent, 3u) << "the proposal brought the servers back in step";
  ASSERT_TRUE(b.lock().release().ok());
  ASSERT_TRUE(s.released(b.lock().token()));
  // A client that saw nothing (proposes 1) over servers in step: one round.
  ASSERT_TRUE(c.acquire(&sent).ok()) << c.lock().last_error();
  EXPECT_EQ(c.lock().fence(), 54u);
  EXPECT_EQ(sent, 3u);
  ASSERT_TRUE(c.lock().release().ok());
}

// The start/step face while the write-back is in flight: nothing shows a
// grant before step() ends the acquire with ok (the fence is not final
// yet, and a failed write-back releases what the round granted).
TEST(QuorumFence, NothingHeldBeforeTheWriteBackEnds) {
  Servers s;
  ASSERT_TRUE(s.start(3));
  Client a;
  ASSERT_TRUE(a.init(s) && a.connect());
  s.set_counter(0, 50);
  s.set_counter(1, 10);
  s.set_counter(2, 10);
  s.block(2);
  QuorumLock& lock = a.lock();
  Status st = lock.start_try_acquire();
  const uint64_t before = a.commands();
  int in_write_back = 0;
  for (int i = 0; i < 10000 && st.code() == ErrorCode::kInProgress; ++i) {
    EXPECT_FALSE(lock.held()) << "step " << i;
    EXPECT_EQ(lock.fence(), 0u) << "step " << i;
    EXPECT_EQ(lock.remaining(), Nanos::zero());
    in_write_back += a.commands() > before ? 1 : 0;
    pollfd fds[kMaxWaitFds];
    const size_t n = lock.wait_fds(fds, kMaxWaitFds);
    poll(fds, n, 10);
    st = lock.step();
  }
  ASSERT_TRUE(st.ok()) << st.to_string() << " " << lock.last_error();
  EXPECT_GT(in_write_back, 0) << "the write-back was in flight between steps";
  EXPECT_TRUE(lock.held());
  EXPECT_EQ(lock.fence(), 51u);
  ASSERT_TRUE(lock.release().ok());
}

// Three clients take turns in a random order over five servers while one
// random server at a time refuses now and then (its counter falls
// behind): every grant's fence is above every earlier one, whichever path
// (one round or two) it took.
TEST(QuorumFence, AlternatingClientsStayStrictlyMonotonic) {
  Servers s;
  ASSERT_TRUE(s.start(5));
  Client clients[3];
  for (Client& c : clients) {
    ASSERT_TRUE(c.init(s));
    warm_up(c);
  }
  std::mt19937 rng(17);
  uint64_t last = 0;
  int one_round = 0, two_rounds = 0;
  constexpr int kGrants = 300;
  for (int i = 0; i < kGrants; ++i) {
    const size_t blocked = rng() % 4 == 0 ? rng() % 5 : 5;
    if (blocked < 5) s.block(blocked);
    Client& c = clients[rng() % 3];
    uint64_t sent = 0;
    ASSERT_TRUE(c.acquire(&sent).ok()) << "grant " << i << ": " << c.lock().last_error();
    ASSERT_GT(c.lock().fence(), last) << "grant " << i;
    last = c.lock().fence();
    ++(sent <= 5 ? one_round : two_rounds);
    ASSERT_TRUE(c.lock().release().ok());
    ASSERT_TRUE(s.released(c.lock().token())) << "grant " << i;
    if (blocked < 5) s.unblock(blocked);
  }
  std::printf(
      "[fence] %d grants over 5 servers, 3 clients: %d in one round, %d with the "
      "write-back; last fence %llu\n",
      kGrants, one_round, two_rounds, static_cast<unsigned long long>(last));
  EXPECT_GT(one_round, kGrants / 2) << "the write-back is the exception";
}

// The holder's fence is on exactly one majority {0, 1} (server 2 far
// behind), decided in one round; it then "crashes" (abandoned, never
// released). The next holder's majority {1, 2} shares only server 1.
TEST(QuorumFence, HolderCrashRightAfterOneRound) {
  Servers s;
  ASSERT_TRUE(s.start(3));
  s.set_counter(0, 100);
  s.set_counter(1, 100);
  s.set_counter(2, 5);
  s.block(2);
  const QuorumOptions o = opts(600);
  uint64_t fence_a = 0;
  {
    std::unique_ptr<Client> a(new Client());
    ASSERT_TRUE(a->init(s, o));
    uint64_t sent = 0;
    ASSERT_TRUE(a->acquire(&sent).ok()) << a->lock().last_error();
    fence_a = a->lock().fence();
    EXPECT_EQ(fence_a, 101u);
    EXPECT_EQ(sent, 3u) << "one round: no write-back";
    EXPECT_EQ(s.counter(2), "5");
  }  // crash: no release; its keys stay until their TTL
  s.unblock(2);
  s.server(0).kill9();
  SystemClock().sleep_for(o.ttl + slow(Millis(50)));  // the keys expire
  Client b;
  ASSERT_TRUE(b.init(s, o));
  ASSERT_TRUE(b.lock().acquire(slow(Millis(2000))).ok()) << b.lock().last_error();
  EXPECT_GT(b.lock().fence(), fence_a) << "server 1 carried the fence";
  EXPECT_EQ(b.lock().fence(), 102u);
  ASSERT_TRUE(b.lock().release().ok());
}

// Data loss (docs/quorum.md): server 1 is the only server the two
// majorities share, and it restarts between the grants.
uint64_t fence_after_restart(Servers& s, bool restore) {
  s.set_counter(0, 100);
  s.block(2);
  Client a;
  if (!a.init(s) || !a.lock().try_acquire().ok() || a.lock().fence() != 101) return 0;
  if (!a.lock().release().ok() || !s.released(a.lock().token()) || s.counter(1) != "101") {
    return 0;
  }
  if (!s.restart(1)) return 0;
  if (restore) {  // rule 2: the highest counter of the others, before it is used
    const uint64_t high = std::max(s.counter_value(0), s.counter_value(2));
    s.set_counter(1, high);
  }
  s.unblock(2);
  s.block(0);
  Client b;
  if (!b.init(s) || !b.lock().acquire(slow(Millis(2000))).ok()) return 0;
  return b.lock().fence();
}

TEST(QuorumFence, RestartWithAofKeepsFencesIncreasing) {
  Servers s;
  ASSERT_TRUE(s.start(3, {"--appendonly", "yes", "--appendfsync", "always"}));
  EXPECT_EQ(fence_after_restart(s, false), 102u);
  // Control: without persistence the counter is lost and the fence goes
  // back (Redlock's known limit; the proposal of a fresh client is 1).
  Servers plain;
  ASSERT_TRUE(plain.start(3));
  const uint64_t back = fence_after_restart(plain, false);
  EXPECT_GT(back, 0u);
  EXPECT_LT(back, 101u) << "a restart without the counter must be able to go back";
}

TEST(QuorumFence, RestoredCounterKeepsFencesIncreasing) {
  Servers s;
  ASSERT_TRUE(s.start(3));
  EXPECT_EQ(fence_after_restart(s, true), 102u);
}

}  // namespace
}  // namespace edgelock
