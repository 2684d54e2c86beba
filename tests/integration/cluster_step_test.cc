// The non-blocking face over a real 3-primary Redis Cluster: a Lock driven
// by start_*()/step() from a poll() loop acquires and releases on every
// primary, and follows MOVED and ASK inside the loop with every step()
// short and the step count bounded; so does a queued FairLock waiter.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../support/keeper_beside.h"
#include "../support/redis_topology.h"
#include "../support/step_loop.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

ConnectionOptions options() {
  ConnectionOptions o;
  o.connect_timeout = Millis(2000) * test::slowdown();
  o.command_timeout = Millis(3000) * test::slowdown();
  o.reconnect_min = Millis(1);
  o.reconnect_max = Millis(10);
  return o;
}

using test::step_bound;

// The caller's loop (tests/support/step_loop.h): 1000 steps, 10 s.
struct Loop : test::StepLoop {
  Loop() : StepLoop(1000, 10) {}
};

class ClusterStepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new test::RedisClusterSetup(3);
    ASSERT_TRUE(cluster_->start()) << "could not build the cluster";
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(client_.init(cluster_->url().c_str(), options()).ok()) << client_.last_error();
    ASSERT_TRUE(client_.refresh(Deadline::after(client_.clock(), Millis(5000))).ok())
        << client_.last_error();
  }
  std::string key_on(int node, const std::string& prefix) {
    for (int i = 0; i < 100000; ++i) {
      const std::string k = prefix + "-" + std::to_string(i);
      if (client_.owner_of(key_slot(k.c_str())) == node) return k;
    }
    return "";
  }
  int server_of(int node) {
    for (int i = 0; i < cluster_->size(); ++i) {
      if (cluster_->node(i).port() == client_.node(static_cast<size_t>(node)).endpoint().port)
        return i;
    }
    return -1;
  }

  // The slot of a key moving from its primary's server to the next one:
  // begin() leaves it migrating with `keys` already moved (ASK from then
  // on), end() hands it over on every node (MOVED from then on).
  struct SlotMove {
    std::string slot, from_id, to_id;
    int from = 0, to = 0, to_port = 0;
    Connection admin[3];
  };
  bool plan_move(SlotMove& m, int primary, const std::string& key) {
    m.slot = std::to_string(key_slot(key.c_str()));
    m.from = server_of(primary);
    m.to = (m.from + 1) % 3;
    m.from_id = cluster_->node_id(m.from);
    m.to_id = cluster_->node_id(m.to);
    m.to_port = cluster_->node(m.to).port();
    for (int i = 0; i < 3; ++i) {
      if (!test::open(m.admin[i], cluster_->node(i).admin_url())) return false;
    }
    return m.to_id.size() == 40;
  }
  static bool begin_move(SlotMove& m, std::initializer_list<std::string> keys) {
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(m.to_port), "", "0",
                                        "5000",    "KEYS"};
    migrate.insert(migrate.end(), keys);
    return run(m.admin[m.to], {"CLUSTER", "SETSLOT", m.slot, "IMPORTING", m.from_id}) == "OK" &&
           run(m.admin[m.from], {"CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.to_id}) == "OK" &&
           run(m.admin[m.from], migrate) == "OK";
  }
  // `lock` (on client_) holds a key of the primary serving `slot`, and
  // that key's slot has begun moving to the next server, keys and all.
  void hold_and_begin_move(Lock& lock, SlotMove& move, int slot, const char* prefix) {
    const int a = client_.owner_of(slot);
    const std::string key = key_on(a, prefix);
    ASSERT_TRUE(plan_move(move, a, key));
    ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
    Loop loop;
    ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk);
    ASSERT_TRUE(begin_move(move, {key, "{" + key + "}:fence"}));
  }
  static bool end_move(SlotMove& m) {
    bool ok = true;
    for (Connection& c : m.admin)
      ok = run(c, {"CLUSTER", "SETSLOT", m.slot, "NODE", m.to_id}) == "OK" && ok;
    return ok;
  }

  static test::RedisClusterSetup* cluster_;
  Cluster client_;
};
test::RedisClusterSetup* ClusterStepTest::cluster_ = nullptr;

TEST_F(ClusterStepTest, AcquireAndReleaseOnEveryPrimaryInAPollLoop) {
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok());
  const int owners[3] = {client_.owner_of(0), client_.owner_of(8192), client_.owner_of(16383)};
  Loop loop;
  for (int node : owners) {
    const std::string key = key_on(node, "step");
    Lock lock(client_);
    ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
    ASSERT_TRUE(lock.nonblocking());
    ASSERT_EQ(loop.drive(lock, lock.start_acquire(Millis(2000))).code(), ErrorCode::kOk)
        << client_.last_error();
    EXPECT_EQ(test::serving_port(client_, lock.key()),
              client_.node(static_cast<size_t>(node)).endpoint().port);
    Lock rival(other);
    ASSERT_TRUE(rival.init(Bytes(key.data(), key.size())).ok());
    EXPECT_EQ(rival.try_acquire().code(), ErrorCode::kBusy) << "held in the server";
    ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
    ASSERT_TRUE(rival.try_acquire().ok()) << "released in the server";
    ASSERT_TRUE(rival.release().ok());
  }
  EXPECT_LT(loop.longest, step_bound());
  std::printf("cluster start/step: %d steps, longest %.3f ms\n", loop.steps,
              std::chrono::duration<double, std::milli>(loop.longest).count());
}

// The other primitives on the same core: a semaphore's permit and a
// rate limiter, driven by their start/step face.
TEST_F(ClusterStepTest, SemaphoreAndRateLimiterInAPollLoop) {
  Loop loop;
  Semaphore sem(client_);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("step-sem")).ok());
  Permit permit;
  ASSERT_EQ(loop.drive(sem, sem.start_try_acquire(&permit)).code(), ErrorCode::kOk)
      << client_.last_error();
  ASSERT_TRUE(permit.nonblocking());
  Semaphore rival(client_);
  ASSERT_TRUE(rival.init(Bytes::from_cstr("step-sem")).ok());  // one permit
  Permit refused;
  EXPECT_EQ(rival.try_acquire(&refused).code(), ErrorCode::kBusy) << "held in the server";
  ASSERT_EQ(loop.drive(permit, permit.start_release()).code(), ErrorCode::kOk);
  RateLimiter cooldown(client_);
  ASSERT_TRUE(cooldown.init(Bytes::from_cstr("step-cooldown")).ok());
  ASSERT_EQ(loop.drive(cooldown, cooldown.start_acquire(Millis(0))).code(), ErrorCode::kOk)
      << client_.last_error();
  ASSERT_TRUE(cooldown.erase_on_server().ok());
  EXPECT_LT(loop.longest, step_bound());
}

// With wait_replicas the grant is confirmed with WAIT as a further step on
// the slot's node; these primaries have no replica, so the acquire ends as
// kNoQuorum by wait_timeout, never held, its unconfirmed grant handed back.
TEST_F(ClusterStepTest, WaitReplicasConfirmedAsSteps) {
  Cluster waiting;
  ClusterOptions co;
  co.wait_replicas = 1;
  co.wait_timeout = Millis(200) * test::slowdown();
  ASSERT_TRUE(waiting.init(cluster_->url().c_str(), options(), co).ok());
  const std::string key = key_on(client_.owner_of(0), "step-wait");
  const int port = cluster_->node(server_of(client_.owner_of(0))).port();
  Lock lock(waiting);
  ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
  ASSERT_TRUE(lock.nonblocking());
  const uint32_t waits = test::command_calls(port, "wait");
  Loop loop;
  EXPECT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kNoQuorum)
      << waiting.last_error();
  EXPECT_EQ(test::command_calls(port, "wait"), waits + 1);
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(waiting.stats().wait_failures, 1u);
  EXPECT_EQ(test::raw_command(port, {"EXISTS", key}), ":0\r\n") << "the grant was handed back";
  EXPECT_LT(loop.longest, step_bound());
}

// A WAIT the server refuses (here an ACL without it; a primary demoted in a
// failover answers an error too) confirms nothing, but the grant landed:
// kNoQuorum, and the grant is handed back.
TEST_F(ClusterStepTest, WaitRefusedIsNoQuorumAndHandedBack) {
  std::string url = "redis-cluster://nowait:nowait-pw@";
  for (int i = 0; i < cluster_->size(); ++i) {
    const int port = cluster_->node(i).port();
    ASSERT_EQ(test::raw_command(
                  port, {"ACL", "SETUSER", "nowait", "on", ">nowait-pw", "~*", "+@all", "-wait"}),
              "+OK\r\n");
    url += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(port);
  }
  Cluster waiting;
  ClusterOptions co;
  co.wait_replicas = 1;
  ASSERT_TRUE(waiting.init(url.c_str(), options(), co).ok());
  const std::string key = key_on(client_.owner_of(0), "step-refused");
  const int port = cluster_->node(server_of(client_.owner_of(0))).port();
  Lock lock(waiting);
  ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
  Loop loop;
  EXPECT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kNoQuorum)
      << waiting.last_error();
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(waiting.stats().wait_failures, 1u);
  EXPECT_EQ(test::raw_command(port, {"EXISTS", key}), ":0\r\n") << "the grant was handed back";
}

// A waiter's loop while the slot of its key moves to another primary and
// the holder (another client) releases: the loop's next attempt gets MOVED
// and follows it.
TEST_F(ClusterStepTest, MovedFollowedInsideTheLoop) {
  const int a = client_.owner_of(0);
  const std::string key = key_on(a, "moved");
  SlotMove move;
  ASSERT_TRUE(plan_move(move, a, key));
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok());
  Lock holder(other);
  ASSERT_TRUE(holder.init(Bytes(key.data(), key.size())).ok());
  ASSERT_TRUE(holder.try_acquire().ok()) << other.last_error();

  Lock waiter(client_);
  LockOptions lo;
  lo.retry_max = Millis(20);
  ASSERT_TRUE(waiter.init(Bytes(key.data(), key.size()), lo).ok());
  Loop loop;
  Status released = ErrorCode::kInvalidArgument;
  const Status got = loop.drive(waiter, waiter.start_acquire(Millis(5000)), 2000, 10, [&] {
    // The waiter has tried (busy) a few times; the slot moves, keys and all.
    EXPECT_TRUE(begin_move(move, {key, "{" + key + "}:fence"}));
    EXPECT_TRUE(end_move(move));
    released = holder.release();
  });
  ASSERT_TRUE(released.ok()) << released.to_string();
  ASSERT_EQ(got.code(), ErrorCode::kOk) << got.to_string() << " " << client_.last_error();
  EXPECT_GE(client_.stats().moved, 1u) << "the loop followed a MOVED";
  EXPECT_EQ(test::serving_port(client_, waiter.key()), move.to_port);
  ASSERT_EQ(loop.drive(waiter, waiter.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_LT(loop.steps, 1000) << "bounded: busy retries every <= 20 ms, then one redirect";
  std::printf("MOVED in the loop: %d steps, longest %.3f ms, moved=%u\n", loop.steps,
              std::chrono::duration<double, std::milli>(loop.longest).count(),
              client_.stats().moved);
}

// Queries are routed steps like the others. While the slot of a held key
// migrates (the key already moved), start_status() gets ASK and reads the
// key's TTL on the importing primary; once the slot has moved,
// start_owned() gets MOVED, follows it, and finds the lease still ours.
TEST_F(ClusterStepTest, QueriesFollowAskAndMovedInsideTheLoop) {
  Lock lock(client_);
  SlotMove move;
  ASSERT_NO_FATAL_FAILURE(hold_and_begin_move(lock, move, 0, "owned-moved"));
  Loop loop;
  const uint32_t asked = client_.stats().ask;
  KeyStatus ks;
  const Status st = loop.drive(lock, lock.start_status(&ks));
  EXPECT_EQ(st.code(), ErrorCode::kOk) << st.to_string() << " " << client_.last_error();
  EXPECT_TRUE(ks.held && ks.expires);
  EXPECT_GT(ks.ttl, Millis(0));
  EXPECT_GT(client_.stats().ask, asked) << "the status followed an ASK";
  ASSERT_TRUE(end_move(move));
  const uint32_t moved = client_.stats().moved;
  const Status own = loop.drive(lock, lock.start_owned());
  EXPECT_EQ(own.code(), ErrorCode::kOk) << own.to_string() << " " << client_.last_error();
  EXPECT_TRUE(lock.held());
  EXPECT_GT(client_.stats().moved, moved) << "the check followed a MOVED";
  EXPECT_EQ(test::serving_port(client_, lock.key()), move.to_port);
  EXPECT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
}

// A caller's own script for the back end's blocking calls.
constexpr Script kPttlScript = make_script("return redis.call('PTTL', KEYS[1])");

// The back end's own blocking calls (Backend::eval(), command()) are the
// same routed steps: after a held key's slot moved, a plain command and a
// script the new owner has never seen (NOSCRIPT, then its body) follow
// the MOVED there.
TEST_F(ClusterStepTest, BackendCallsAreTheRoutedSteps) {
  Lock lock(client_);
  SlotMove move;
  ASSERT_NO_FATAL_FAILURE(hold_and_begin_move(lock, move, 16383, "backend-moved"));
  ASSERT_TRUE(end_move(move));
  Backend& backend = client_;
  const uint32_t moved = client_.stats().moved;
  const Bytes get[2] = {Bytes::from_cstr("GET"), lock.key()};
  const Deadline d = Deadline::after(client_.clock(), Millis(3000) * test::slowdown());
  Result<const Reply*> r = backend.command(lock.key(), get, d);
  ASSERT_TRUE(r.ok()) << r.status().to_string() << " " << client_.last_error();
  EXPECT_EQ(std::string(r.value()->str, r.value()->len),
            std::string(reinterpret_cast<const char*>(lock.token().data), lock.token().size));
  EXPECT_GT(client_.stats().moved, moved) << "the command followed a MOVED";
  EXPECT_EQ(test::serving_port(client_, lock.key()), move.to_port);
  const Bytes key[1] = {lock.key()};
  r = backend.eval({&kPttlScript, key}, d);
  ASSERT_TRUE(r.ok()) << r.status().to_string() << " " << client_.last_error();
  EXPECT_EQ(r.value()->type, ReplyType::kInteger);
  EXPECT_GT(r.value()->integer, 0);
  EXPECT_TRUE(lock.release().ok()) << client_.last_error();
}

// A FairLock waiter queued behind a holder (another client) while its
// key's slot, queue and all, moves to another primary: its wake-list BLPOP
// or its next attempt gets MOVED, the wait goes on at the new owner with
// its place kept, and the holder's release there hands it the lock.
TEST_F(ClusterStepTest, FairLockFollowsMovedInsideTheLoop) {
  const int a = client_.owner_of(8192);
  const std::string key = key_on(a, "fair-moved");
  SlotMove move;
  ASSERT_TRUE(plan_move(move, a, key));
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok());
  const Bytes k(key.data(), key.size());
  FairLock holder(other), waiter(client_);
  FairLockOptions fo;
  fo.retry_max = Millis(20);
  ASSERT_TRUE(holder.init(k, fo).ok() && waiter.init(k, fo).ok());
  ASSERT_TRUE(waiter.nonblocking());
  ASSERT_TRUE(holder.try_acquire().ok()) << other.last_error();
  Loop loop;
  Status released = ErrorCode::kInvalidArgument;
  const uint32_t moved = client_.stats().moved;
  const Status got = loop.drive(waiter, waiter.start_acquire(Millis(8000)), 3000, 1, [&] {
    // Queued after its first attempt, its BLPOP out: the slot moves.
    EXPECT_EQ(waiter.queue_position(), 1u);
    EXPECT_TRUE(begin_move(move, {key, "{" + key + "}:fence", "{" + key + "}:queue"}));
    EXPECT_EQ(run(move.admin[move.from], {"CLUSTER", "COUNTKEYSINSLOT", move.slot}), "0")
        << "every key moved";
    EXPECT_TRUE(end_move(move));
    released = holder.release();
  });
  ASSERT_TRUE(released.ok()) << released.to_string() << " " << other.last_error();
  ASSERT_EQ(got.code(), ErrorCode::kOk) << got.to_string() << " " << client_.last_error();
  EXPECT_GT(client_.stats().moved, moved) << "the loop followed a MOVED";
  EXPECT_EQ(test::serving_port(client_, waiter.key()), move.to_port);
  EXPECT_EQ(run(move.admin[move.to], {"GET", key}),
            std::string(reinterpret_cast<const char*>(waiter.token().data), waiter.token().size));
  ASSERT_EQ(loop.drive(waiter, waiter.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_LT(loop.steps, 1000);
  std::printf("fair MOVED in the loop: %d steps, longest %.3f ms, moved=%u\n", loop.steps,
              test::ms_of(loop.longest), client_.stats().moved);
}

// A routed acquire given up on (its node stopped past the deadline) that
// the node runs later, when it resumes: the late grant changes nothing the
// client claims (never held), and cleanup assumes the worst: the release
// deletes what the late request wrote, with the token kept for it.
TEST_F(ClusterStepTest, LateAcquireAfterATimeoutClaimsNothingAndIsCleanedUp) {
  const int node = client_.owner_of(12000);
  const std::string key = key_on(node, "late");
  const int server = server_of(node);
  const int port = cluster_->node(server).port();
  ConnectionOptions quick = options();
  quick.command_timeout = Millis(300) * test::slowdown();
  Cluster c;
  ASSERT_TRUE(c.init(cluster_->url().c_str(), quick).ok());
  Lock lock(c);
  ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk) << c.last_error();
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk) << c.last_error();
  cluster_->node(server).pause();
  const Status given_up = loop.drive(lock, lock.start_try_acquire());
  cluster_->node(server).resume();
  EXPECT_EQ(given_up.code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_FALSE(lock.held());
  const std::string token(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  std::string late;
  for (int i = 0; i < 200 && late.empty(); ++i) {
    const std::string r = test::raw_command(port, {"GET", key});
    if (r.rfind("$", 0) == 0 && r != "$-1\r\n") late = r;
    if (late.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(late.find(token), std::string::npos) << "the late acquire ran on the server: " << late;
  EXPECT_FALSE(lock.held()) << "a late grant changes nothing the client claims";
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk) << c.last_error();
  EXPECT_EQ(test::raw_command(port, {"EXISTS", key}), ":0\r\n") << "cleaned up";
  EXPECT_LT(loop.longest, step_bound());
}

// A Lock waiting alone on its Cluster object blocks on the release signal
// on the key's node with its next attempt pipelined behind (one write):
// the holder's release hands the lock over within a round trip or two,
// not a backoff pause.
TEST_F(ClusterStepTest, LockWaiterWokenOnItsNode) {
  const int node = client_.owner_of(4096);
  const std::string key = key_on(node, "woken");
  const int port = cluster_->node(server_of(node)).port();
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok());
  Lock holder(other), waiter(client_);
  LockOptions lo;
  lo.ttl = std::chrono::duration_cast<Millis>(Millis(30000) * test::slowdown());
  lo.retry_min = Millis(500) * test::slowdown();  // a poll would show as a long handoff
  lo.retry_max = lo.retry_min;
  ASSERT_TRUE(holder.init(Bytes(key.data(), key.size()), lo).ok());
  ASSERT_TRUE(waiter.init(Bytes(key.data(), key.size()), lo).ok());
  ASSERT_TRUE(holder.try_acquire().ok()) << other.last_error();
  const uint32_t blpops = test::command_calls(port, "blpop");
  Loop loop;
  std::chrono::steady_clock::time_point released;
  const auto t0 = std::chrono::steady_clock::now();
  const Status got =
      loop.drive(waiter, waiter.start_acquire(Millis(10000) * test::slowdown()), 1000, 1, [&] {
        EXPECT_TRUE(holder.release().ok()) << other.last_error();
        released = std::chrono::steady_clock::now();
      });
  const Nanos handoff = std::chrono::steady_clock::now() - released;
  ASSERT_EQ(got.code(), ErrorCode::kOk) << client_.last_error();
  EXPECT_GT(test::command_calls(port, "blpop"), blpops) << "it waited on the signal";
  EXPECT_LT(handoff, Millis(200) * test::slowdown()) << "woken, not polled";
  EXPECT_LT(Nanos(std::chrono::steady_clock::now() - t0), lo.retry_min) << "no backoff pause";
  EXPECT_LT(loop.longest, step_bound());
  std::printf("cluster lock handoff: %.3f ms, %d steps\n", test::ms_of(handoff), loop.steps);
  ASSERT_EQ(loop.drive(waiter, waiter.start_release()).code(), ErrorCode::kOk);
}

// A keeper's Lock and a waiting FairLock on one Cluster object, their keys
// on one node: the waiter must never hold that node's connection for more
// than a round trip (it polls, no BLPOP), so every renewal goes through.
TEST_F(ClusterStepTest, KeeperKeepsItsLeaseBesideAFairWaiter) {
  const int node = client_.owner_of(8192);
  const std::string ka = key_on(node, "beside-a"), kb = key_on(node, "beside-b");
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok());
  FairLock holder(other), waiter(client_);
  FairLockOptions held;  // outlasts the test, also under qemu
  held.ttl = std::chrono::duration_cast<Millis>(Millis(60000) * test::slowdown());
  ASSERT_TRUE(holder.init(Bytes(kb.data(), kb.size()), held).ok());
  ASSERT_TRUE(waiter.init(Bytes(kb.data(), kb.size())).ok());
  ASSERT_TRUE(holder.try_acquire().ok()) << other.last_error();
  Lock a(client_);
  // Longer than a renewal's budget (the command timeout, 3 s here).
  const Millis ttl = std::chrono::duration_cast<Millis>(Millis(8000) * test::slowdown());
  ASSERT_TRUE(a.init(Bytes(ka.data(), ka.size()), LockOptions{ttl}).ok());
  ASSERT_TRUE(a.try_acquire().ok()) << client_.last_error();
  test::expect_kept_beside(a, waiter, cluster_->node(server_of(node)).port());
  EXPECT_TRUE(a.release().ok()) << client_.last_error();
  EXPECT_TRUE(holder.release().ok()) << other.last_error();
}

// A fresh client's first start/step request reads the slot map as steps
// of the loop, and the seed it asks first is stopped (SIGSTOP: it accepts
// the connection and never answers): the read waits that node out for one
// command timeout as steps and asks the next seed; no step() blocks.
TEST_F(ClusterStepTest, MapReadAsStepsWaitsOutAStoppedNode) {
  ConnectionOptions o = options();
  o.command_timeout = Millis(300) * test::slowdown();
  o.connect_timeout = Millis(300) * test::slowdown();
  const int stopped = 0, next = 1;
  const std::string url =
      "redis-cluster://127.0.0.1:" + std::to_string(cluster_->node(stopped).port()) +
      ",127.0.0.1:" + std::to_string(cluster_->node(next).port());
  std::string key;  // on a node that answers
  for (int i = 0; i < 1000 && key.empty(); ++i) {
    const std::string k = "step-map-" + std::to_string(i);
    if (server_of(client_.owner_of(key_slot(k.c_str()))) != stopped) key = k;
  }
  Cluster fresh;
  ASSERT_TRUE(fresh.init(url.c_str(), o).ok());
  Lock lock(fresh);
  ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
  ASSERT_TRUE(lock.nonblocking());
  Loop loop;
  cluster_->node(stopped).pause();
  const TimePoint t0 = fresh.clock().now();
  // The stopped seed is waited out one command_timeout (3 s under qemu) in
  // 2 ms polls: more steps than the loop's default.
  const Status got = loop.drive(lock, lock.start_acquire(Millis(3000) * test::slowdown()),
                                1000 * test::slowdown());
  const Nanos took = fresh.clock().now() - t0;
  cluster_->node(stopped).resume();
  ASSERT_EQ(got.code(), ErrorCode::kOk) << got.to_string() << " " << fresh.last_error();
  EXPECT_EQ(fresh.stats().refreshes, 1u) << "the map was read inside the loop";
  EXPECT_GE(took, o.command_timeout) << "the stopped seed was asked and waited out";
  EXPECT_EQ(fresh.node(static_cast<size_t>(fresh.owner_of(key_slot(key.c_str())))).endpoint().port,
            test::serving_port(fresh, lock.key()))
      << "sent to the slot's owner from the map";
  EXPECT_EQ(fresh.stats().moved, 0u) << "no redirect needed";
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_GT(loop.steps, 3) << "the wait was spread over steps";
  std::printf("map read as steps past a stopped seed: %.0f ms, %d steps, longest %.3f ms\n",
              test::ms_of(took), loop.steps, test::ms_of(loop.longest));
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk) << fresh.last_error();
}

// A held lock whose keys moved while its slot is still migrating: the
// extend gets ASK and goes to the importing node with ASKING, in the loop;
// the release waits out TRYAGAIN there until the slot is handed over, and
// the next acquire follows MOVED.
TEST_F(ClusterStepTest, AskThenMovedFollowedInsideTheLoop) {
  Lock lock(client_);
  SlotMove move;
  ASSERT_NO_FATAL_FAILURE(hold_and_begin_move(lock, move, 16383, "ask"));
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_extend(Millis(5000))).code(), ErrorCode::kOk)
      << client_.last_error();
  EXPECT_GE(client_.stats().ask, 1u);
  // The release is a multi-key script (it also signals the wake list):
  // while the slot is half moved it gets TRYAGAIN and waits in the loop
  // until the slot is handed over.
  const Status released =
      loop.drive(lock, lock.start_release(), 1000, 5, [&] { EXPECT_TRUE(end_move(move)); });
  ASSERT_EQ(released.code(), ErrorCode::kOk) << client_.last_error();
  EXPECT_GE(client_.stats().tryagain, 1u);
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  EXPECT_GE(client_.stats().moved, 1u);
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_LT(loop.steps, 100);
  std::printf(
      "ASK, TRYAGAIN, MOVED in the loop: %d steps, longest %.3f ms, ask=%u tryagain=%u "
      "moved=%u\n",
      loop.steps, std::chrono::duration<double, std::milli>(loop.longest).count(),
      client_.stats().ask, client_.stats().tryagain, client_.stats().moved);
}

}  // namespace
}  // namespace edgelock
