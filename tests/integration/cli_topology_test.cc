// The edgelock tool over Redis Sentinel and Redis Cluster: the
// same subcommands and exit codes as on one server, against the real
// set-ups of tests/support/redis_topology.h, and `run` keeping its lease
// across a Sentinel failover.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "../support/redis_topology.h"
#include "cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers
using test::raw_command;
using test::slowdown;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::string first_word(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  in >> w;
  return w;
}

// The value of `key` on the node at `port` ("" if absent, redirected or
// not a string).
std::string get_on(int port, const std::string& key) {
  const std::string r = raw_command(port, {"GET", key});
  if (r.rfind("$", 0) != 0 || r.rfind("$-1", 0) == 0) return "";
  const size_t start = r.find("\r\n");
  return r.substr(start + 2, r.size() - start - 4);
}

// Every lock subcommand with its exit codes, as on one server. `value_at`
// reads the key from wherever the back end keeps it.
template <typename ValueAt>
void lock_subcommands(CliTest& t, const std::string& url, ValueAt value_at) {
  auto cli = [&](std::vector<std::string> args, const Env& env = {}) {
    return t.run_cli(args, env, url);
  };
  Outcome a = cli({"-t", "5000", "acquire", "pump"});
  ASSERT_EQ(a.rc, 0) << a.err;
  const std::string token = first_word(a.out);
  EXPECT_EQ(token.size(), 32u) << a.out;
  EXPECT_EQ(value_at("pump"), token) << "the grant is on the server that serves the key";
  EXPECT_EQ(cli({"status", "pump"}).out.substr(0, 5), "held ");
  Outcome busy = cli({"--json", "-w", "0", "acquire", "pump"});
  EXPECT_EQ(busy.rc, 1) << busy.err;
  EXPECT_TRUE(has(busy.out, "{\"error\":\"busy\",\"exit\":1,\"key\":\"pump\"")) << busy.out;
  EXPECT_EQ(cli({"extend", "pump", "stale-token"}).rc, 5);
  EXPECT_EQ(cli({"-t", "8000", "extend", "pump", token}).rc, 0);
  EXPECT_EQ(cli({"release", "pump", "stale-token"}).rc, 5);
  Outcome rel = cli({"--json", "release", "pump", token});
  EXPECT_EQ(rel.rc, 0) << rel.err;
  EXPECT_TRUE(has(rel.out, "\"held\":false,\"exit\":0}")) << rel.out;
  EXPECT_EQ(value_at("pump"), "");
  EXPECT_EQ(cli({"status", "pump"}).out, "free\n");
  EXPECT_EQ(cli({"release", "pump", token}).rc, 5);
  Outcome q = cli({"-q", "acquire", "quiet"});
  EXPECT_EQ(q.rc, 0);
  EXPECT_EQ(first_word(q.out).size(), 32u) << "-q keeps the token: " << q.out;
  EXPECT_EQ(cli({"release", "quiet", first_word(q.out)}).rc, 0);
  Outcome r = cli({"run", "job", "--", "sh", "-c", "echo $EDGELOCK_KEY $EDGELOCK_FENCE; exit 7"});
  EXPECT_EQ(r.rc, 7) << r.err;
  EXPECT_EQ(r.out.substr(0, 4), "job ") << r.out;
  EXPECT_EQ(value_at("job"), "") << "released when COMMAND exited";
}

// Three TTLs long: only renewals keep it.
void run_keeps_the_lease(CliTest& t, const std::string& url) {
  const int ttl = 600 * std::min(slowdown(), 4);
  const std::string secs = std::to_string(3.3 * ttl / 1000.0);
  Outcome o = t.run_cli({"-t", std::to_string(ttl), "run", "long", "--", "sleep", secs}, {}, url);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_GE(o.ms, 3 * ttl);
  EXPECT_EQ(o.err, "") << "no loss reported";
}

// semaphore and cooldown run on every back end, as the locks do.
void primitives(CliTest& t, const std::string& url) {
  Outcome s = t.run_cli({"semaphore", "slots", "--permits", "2"}, {}, url);
  Outcome c = t.run_cli({"cooldown", "modem", "--period", "5000"}, {}, url);
  Outcome q = t.run_cli({"cooldown", "dl", "--quota", "2", "--window", "5000"}, {}, url);
  EXPECT_EQ(s.rc, 0) << s.err;
  EXPECT_EQ(s.out.size(), 33u) << "a permit id and a newline: " << s.out;
  EXPECT_EQ(c.out, "allowed\n") << c.err;
  EXPECT_EQ(q.out, "allowed\n") << q.err;
  Outcome again = t.run_cli({"-w", "0", "cooldown", "modem", "--period", "5000"}, {}, url);
  EXPECT_EQ(again.rc, 1) << again.err;
}

class CliSentinel : public CliTest {
 protected:
  static void SetUpTestSuite() {
    CliTest::SetUpTestSuite();
    setup_ = new test::SentinelSetup();
    if (!setup_->start()) {
      delete setup_;
      setup_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete setup_;
    setup_ = nullptr;
    CliTest::TearDownTestSuite();
  }
  void SetUp() override {
    CliTest::SetUp();
    ASSERT_NE(setup_, nullptr) << "could not start primary, replica and sentinels";
    Connection primary;
    ASSERT_TRUE(test::open(primary, setup_->primary().url()));
    ASSERT_EQ(test::run(primary, {"FLUSHALL"}), "OK");
  }
  std::string primary_value(const std::string& key) {
    return get_on(setup_->primary().port(), key);
  }

  inline static test::SentinelSetup* setup_ = nullptr;
};

TEST_F(CliSentinel, LockSubcommandsAndExitCodes) {
  lock_subcommands(*this, setup_->url(), [&](const std::string& k) { return primary_value(k); });
  Outcome st = run_cli({"--stats", "status", "pump"}, {}, setup_->url());
  EXPECT_TRUE(has(st.err, "stats sentinel: resolves=1")) << st.err;
  EXPECT_TRUE(has(st.err, "stats connection 127.0.0.1:" + std::to_string(setup_->primary().port())))
      << st.err;
}

TEST_F(CliSentinel, RunKeepsTheLeasePastItsTtl) { run_keeps_the_lease(*this, setup_->url()); }

// --wait-replicas: the grant counts once the replica has it.
TEST_F(CliSentinel, WaitReplicasConfirmsWithTheReplica) {
  Outcome a = run_cli({"--wait-replicas", "1", "acquire", "valve"}, {}, setup_->url());
  ASSERT_EQ(a.rc, 0) << a.err;
  EXPECT_EQ(get_on(setup_->replica().port(), "valve"), first_word(a.out))
      << "on the replica before it was reported";
  Outcome two = run_cli({"--json", "--wait-replicas", "2", "-t", "2000", "acquire", "hatch"}, {},
                        setup_->url());
  EXPECT_EQ(two.rc, 3) << "only one replica: " << two.err;
  EXPECT_TRUE(has(two.out, "{\"error\":\"no_quorum\",\"exit\":3")) << two.out;
  EXPECT_EQ(primary_value("hatch"), "") << "an unconfirmed grant is handed back";
}

TEST_F(CliSentinel, SemaphoreAndCooldown) { primitives(*this, setup_->url()); }

TEST_F(CliSentinel, PasswordComesFromTheEnvironment) {
  // The primary has no password: a password sent with AUTH is refused,
  // which shows it was sent; it is never printed.
  Outcome o = run_cli({"--json", "status", "k"}, {"EDGELOCK_PASSWORD=pw-from-env"}, setup_->url());
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_FALSE(has(o.err + o.out, "pw-from-env")) << o.err;
  EXPECT_TRUE(has(o.out, "\"exit\":3")) << o.out;
  EXPECT_EQ(run_cli({"status", "k"}, {}, setup_->url()).rc, 0);
}

TEST_F(CliSentinel, NoSentinelAnsweringExitsThree) {
  const std::string url = "redis-sentinel://127.0.0.1:" + std::to_string(test::free_port()) +
                          ",127.0.0.1:" + std::to_string(test::free_port()) + "/edge";
  Outcome o =
      run_cli({"acquire", "k"}, {}, url);  // waits forever for a busy lock, not for a dead back end
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_LT(o.ms, 5000 * slowdown());
  EXPECT_TRUE(has(o.err, "no primary found through the sentinels")) << o.err;
  EXPECT_EQ(run_cli({"status", "k"}, {}, "redis-sentinel://127.0.0.1:1").rc, 2) << "no master name";
  Outcome quorum = run_cli({"-u", server_->url(), "status", "k"}, {}, setup_->url());
  EXPECT_EQ(quorum.rc, 2) << "a quorum spans independent servers: " << quorum.err;
}

// A fresh set-up: the failover moves the primary.
class CliSentinelFailover : public CliSentinel {};

TEST_F(CliSentinelFailover, RunRenewsAcrossAFailover) {
  const int ttl = 10000 * std::min(slowdown(), 3);
  const std::string stop = dir_ + "/stop";
  // COMMAND runs until the test says stop (bounded: 60 s).
  const std::string body =
      "for i in $(seq 1 1200); do [ -e " + stop + " ] && exit 0; sleep 0.05; done; exit 9";
  const int64_t t0 = now_ms();
  const pid_t p =
      start({"--stats", "-t", std::to_string(ttl), "run", "gate", "--", "sh", "-c", body}, "run",
            {}, setup_->url());
  for (int i = 0; i < 400 && primary_value("gate").empty(); ++i) usleep(10000);
  const std::string token = primary_value("gate");
  ASSERT_EQ(token.size(), 32u) << "run holds the lock on the primary";
  ASSERT_EQ(setup_->failover(), "+OK\r\n");
  const int replica = setup_->replica().port();
  bool moved = false;
  for (int i = 0; i < 600 && !moved; ++i) {
    moved = setup_->reported_primary_port() == replica;
    if (!moved) usleep(20000);
  }
  ASSERT_TRUE(moved) << "sentinel did not promote the replica";
  // One whole TTL after the failover: the lease lives on the new primary
  // only if run renewed it there.
  usleep(static_cast<useconds_t>(ttl) * 1000);
  EXPECT_EQ(get_on(replica, "gate"), token) << "renewed on the new primary";
  const int pttl = std::atoi(raw_command(replica, {"PTTL", "gate"}).substr(1).c_str());
  EXPECT_GT(pttl, 0);
  std::ofstream(stop).put('\n');
  Outcome o = finish(p, "run", t0, 3 * ttl + 20000);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_FALSE(has(o.err, "lease on gate")) << "no loss: " << o.err;
  EXPECT_TRUE(has(o.err, "primary_changes=1")) << o.err;
  EXPECT_EQ(get_on(replica, "gate"), "") << "released on the new primary";
}

class CliCluster : public CliTest {
 protected:
  static void SetUpTestSuite() {
    CliTest::SetUpTestSuite();
    setup_ = new test::RedisClusterSetup(3);
    if (!setup_->start()) {
      delete setup_;
      setup_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete setup_;
    setup_ = nullptr;
    CliTest::TearDownTestSuite();
  }
  void SetUp() override {
    CliTest::SetUp();
    ASSERT_NE(setup_, nullptr) << "could not start the cluster";
    for (int i = 0; i < setup_->size(); ++i) raw_command(setup_->node(i).port(), {"FLUSHALL"});
  }
  // The key's value on whichever node holds it.
  std::string value(const std::string& key) {
    for (int i = 0; i < setup_->size(); ++i) {
      const std::string v = get_on(setup_->node(i).port(), key);
      if (!v.empty()) return v;
    }
    return "";
  }

  inline static test::RedisClusterSetup* setup_ = nullptr;
};

TEST_F(CliCluster, LockSubcommandsAndExitCodes) {
  lock_subcommands(*this, setup_->url(), [&](const std::string& k) { return value(k); });
  Outcome st = run_cli({"--stats", "status", "pump"}, {}, setup_->url());
  EXPECT_TRUE(has(st.err, "stats cluster: refreshes=1")) << st.err;
  Outcome bad = run_cli({"acquire", "a{b"}, {}, setup_->url());
  EXPECT_EQ(bad.rc, 2) << "companion keys would land in another slot: " << bad.err;
  EXPECT_TRUE(has(bad.err, "cannot be used in a cluster")) << bad.err;
}

// A cluster without replicas cannot confirm a grant with one.
TEST_F(CliCluster, WaitReplicasWithoutReplicasFailsClosed) {
  Outcome o = run_cli({"--json", "--wait-replicas", "1", "-t", "2000", "acquire", "valve"}, {},
                      setup_->url());
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_TRUE(has(o.out, "{\"error\":\"no_quorum\",\"exit\":3")) << o.out;
  EXPECT_EQ(value("valve"), "") << "an unconfirmed grant is handed back";
}

// --replica-timeout sets how long WAIT may block (the library's default
// otherwise): with no replica to answer, WAIT takes all of it.
TEST_F(CliCluster, ReplicaTimeoutBoundsTheWait) {
  const int64_t t0 = now_ms();
  Outcome o = run_cli(
      {"--wait-replicas", "1", "--replica-timeout", "600", "-t", "8000", "acquire", "valve"}, {},
      setup_->url());
  const int64_t took = now_ms() - t0;
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_TRUE(has(o.err, "within 600 ms")) << o.err;
  EXPECT_GE(took, 600) << o.err;
  EXPECT_EQ(value("valve"), "") << "an unconfirmed grant is handed back";
  Outcome dflt =
      run_cli({"--wait-replicas", "1", "-t", "8000", "acquire", "valve"}, {}, setup_->url());
  EXPECT_EQ(dflt.rc, 3) << dflt.err;
  EXPECT_TRUE(has(dflt.err, "within 200 ms")) << "the default is kept: " << dflt.err;
  EXPECT_EQ(run_cli({"--replica-timeout", "1200", "status", "valve"}, {}, setup_->url()).rc, 2)
      << "without --wait-replicas it means nothing";
}

TEST_F(CliCluster, RunKeepsTheLeasePastItsTtl) { run_keeps_the_lease(*this, setup_->url()); }

TEST_F(CliCluster, SemaphoreAndCooldown) { primitives(*this, setup_->url()); }

TEST_F(CliCluster, PasswordComesFromTheEnvironment) {
  Outcome o = run_cli({"status", "k"}, {"REDISCLI_AUTH=pw-from-env"}, setup_->url());
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_FALSE(has(o.err, "pw-from-env")) << o.err;
  Outcome u = run_cli({"status", "k"}, {"REDISCLI_AUTH=pw-from-env"},
                      "redis-cluster://:***@127.0.0.1:" + std::to_string(setup_->node(0).port()));
  EXPECT_EQ(u.rc, 3) << "the URL's password wins over the environment: " << u.err;
  EXPECT_EQ(run_cli({"status", "k"}, {}, setup_->url()).rc, 0);
  Outcome dead = run_cli({"status", "k"}, {},
                         "redis-cluster://127.0.0.1:" + std::to_string(test::free_port()));
  EXPECT_EQ(dead.rc, 3) << dead.err;
  EXPECT_TRUE(has(dead.err, "cannot reach the cluster")) << dead.err;
}

}  // namespace
}  // namespace edgelock
