// Locks in a real 3-primary Redis Cluster: keys in every primary's slots, a
// slot migration in the middle of a run (ASK, TRYAGAIN, MOVED followed),
// and mutual exclusion across processes.
#include <gtest/gtest.h>
#include <poll.h>

#include <string>
#include <thread>

#include "../support/backend_checks.h"
#include "../support/contention.h"
#include "../support/redis_topology.h"
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

class ClusterTest : public ::testing::Test {
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
  // A key whose slot the client maps to node `node`, named prefix-N.
  std::string key_on(int node, const std::string& prefix) {
    for (int i = 0; i < 100000; ++i) {
      const std::string k = prefix + "-" + std::to_string(i);
      if (client_.owner_of(key_slot(k.c_str())) == node) return k;
    }
    return "";
  }
  // The index (in the cluster setup) of the server at client node `node`.
  int server_of(int node) {
    for (int i = 0; i < cluster_->size(); ++i) {
      if (cluster_->node(i).port() == client_.node(static_cast<size_t>(node)).endpoint().port)
        return i;
    }
    return -1;
  }

  static test::RedisClusterSetup* cluster_;
  Cluster client_;
};
test::RedisClusterSetup* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, SlotMapCoversEverySlotWithThreePrimaries) {
  int owners[3] = {-1, -1, -1};
  int distinct = 0;
  for (uint16_t s = 0; s < kClusterSlots; ++s) {
    const int o = client_.owner_of(s);
    ASSERT_GE(o, 0) << "slot " << s;
    bool seen = false;
    for (int i = 0; i < distinct; ++i) seen |= owners[i] == o;
    if (!seen) {
      ASSERT_LT(distinct, 3);
      owners[distinct++] = o;
    }
  }
  EXPECT_EQ(distinct, 3);
}

TEST_F(ClusterTest, LocksOnEveryPrimary) {
  std::vector<int> nodes;
  for (uint16_t s : {0, 8192, 16383}) nodes.push_back(client_.owner_of(s));
  ASSERT_EQ(nodes.size(), 3u);
  for (int node : nodes) {
    const std::string key = key_on(node, "valve");
    ASSERT_FALSE(key.empty());
    const int server = server_of(node);
    ASSERT_GE(server, 0);
    Lock lock(client_);
    ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
    ASSERT_TRUE(lock.try_acquire().ok()) << key << ": " << lock.last_error();
    EXPECT_EQ(test::serving_port(client_, lock.key()), cluster_->node(server).port());
    // The key and its fencing counter live on the slot's primary.
    Connection direct;
    ASSERT_TRUE(test::open(direct, cluster_->node(server).url()));
    EXPECT_EQ(run(direct, {"GET", key}),
              std::string(reinterpret_cast<const char*>(lock.token().data), lock.token().size));
    EXPECT_EQ(run(direct, {"GET", "{" + key + "}:fence"}), std::to_string(lock.fence()));
    ASSERT_TRUE(lock.extend(Millis(2000)).ok());
    const Result<bool> owned = lock.owned();
    ASSERT_TRUE(owned.ok() && owned.value());
    const Result<KeyStatus> st = lock.status();
    ASSERT_TRUE(st.ok());
    EXPECT_TRUE(st.value().held);
    ASSERT_TRUE(lock.release().ok());
    EXPECT_EQ(run(direct, {"EXISTS", key}), "0");
  }
  EXPECT_EQ(client_.stats().moved, 0u) << "the map was right: no redirects";
  EXPECT_EQ(client_.stats().ask, 0u);
}

// Every primitive on each primary's slots, through two cluster clients: the
// keys of one tag (and the companion keys) live on the primary owning it.
TEST_F(ClusterTest, EveryPrimitiveOnEveryPrimary) {
  Cluster other;
  ASSERT_TRUE(other.init(cluster_->url().c_str(), options()).ok()) << other.last_error();
  for (uint16_t s : {0, 8192, 16383}) {
    const int node = client_.owner_of(s);
    const std::string tag = key_on(node, "every");
    ASSERT_FALSE(tag.empty());
    test::check_every_primitive(client_, other, tag);
    Connection direct;
    ASSERT_TRUE(test::open(direct, cluster_->node(server_of(node)).url()));
    EXPECT_EQ(run(direct, {"EXISTS", "{" + tag + "}lock:fence"}), "1") << tag;
    EXPECT_EQ(run(direct, {"EXISTS", "{" + tag + "}reentrant:fence"}), "1") << tag;
  }
  EXPECT_EQ(client_.stats().moved, 0u) << "the map was right: no redirects";
  // A key whose companions would land in another slot is refused at init().
  Lock lock(client_);
  ReentrantLock reentrant(client_);
  EXPECT_EQ(lock.init(Bytes::from_cstr("a{b")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(reentrant.init(Bytes::from_cstr("a{b")).code(), ErrorCode::kInvalidArgument);
}

TEST_F(ClusterTest, OneSeedFindsEveryPrimary) {
  // A client that only knows one seed still reaches every slot.
  Cluster lone;
  const std::string url = "redis-cluster://127.0.0.1:" + std::to_string(cluster_->node(0).port());
  ASSERT_TRUE(lone.init(url.c_str(), options()).ok());
  for (int node = 0; node < 3; ++node) {
    const std::string key = key_on(client_.owner_of(static_cast<uint16_t>(node * 5461)), "pump");
    Lock lock(lone);
    ASSERT_TRUE(lock.init(Bytes(key.data(), key.size())).ok());
    ASSERT_TRUE(lock.try_acquire().ok()) << lone.last_error();
    ASSERT_TRUE(lock.release().ok());
  }
  EXPECT_EQ(lone.stats().refreshes, 1u);
  EXPECT_GE(lone.node_count(), 3u);
}

TEST_F(ClusterTest, SlotMigrationMidRun) {
  // Source A owns the key's slot; it moves to B while a lock is held and
  // while another client waits for it.
  const int a = client_.owner_of(0);
  const std::string key = key_on(a, "door");
  const uint16_t slot = key_slot(key.c_str());
  const int sa = server_of(a);
  const int sb = (sa + 1) % 3;
  const std::string ida = cluster_->node_id(sa), idb = cluster_->node_id(sb);
  ASSERT_EQ(ida.size(), 40u);
  ASSERT_EQ(idb.size(), 40u);
  Connection ca, cb, cc;
  ASSERT_TRUE(test::open(ca, cluster_->node(sa).admin_url()));
  ASSERT_TRUE(test::open(cb, cluster_->node(sb).admin_url()));
  ASSERT_TRUE(test::open(cc, cluster_->node((sa + 2) % 3).admin_url()));

  Lock holder(client_);
  ASSERT_TRUE(holder.init(Bytes(key.data(), key.size())).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  const uint64_t first_fence = holder.fence();

  const std::string s = std::to_string(slot);
  ASSERT_EQ(run(cb, {"CLUSTER", "SETSLOT", s, "IMPORTING", ida}), "OK");
  ASSERT_EQ(run(ca, {"CLUSTER", "SETSLOT", s, "MIGRATING", idb}), "OK");
  ASSERT_EQ(run(ca, {"MIGRATE", "127.0.0.1", std::to_string(cluster_->node(sb).port()), "", "0",
                     "5000", "KEYS", key, "{" + key + "}:fence"}),
            "OK");
  // The lock's keys now live on B while A still owns the slot: ASK.
  ASSERT_TRUE(holder.extend(Millis(5000)).ok()) << client_.last_error();
  EXPECT_GE(client_.stats().ask, 1u);
  const Result<bool> owned = holder.owned();
  ASSERT_TRUE(owned.ok() && owned.value()) << client_.last_error();
  ASSERT_TRUE(holder.status().ok()) << client_.last_error();

  // Now release, and let a waiter on its own client ask for the lock. Both
  // are multi-key scripts (the release also signals the wake list), so
  // while the slot is half moved they get TRYAGAIN and wait it out.
  Status released = ErrorCode::kInvalidArgument;  // until the thread reports
  std::thread releaser([&] { released = holder.release(); });
  Status waited = ErrorCode::kInvalidArgument;
  uint64_t second_fence = 0;
  ClusterStats waiter_stats;
  std::thread waiter([&] {
    Cluster other;
    if (!other.init(cluster_->url().c_str(), options()).ok()) return;
    Lock lock(other);
    LockOptions lo;
    lo.retry_max = Millis(20);
    if (!lock.init(Bytes(key.data(), key.size()), lo).ok()) return;
    waited = lock.acquire(Millis(8000) * test::slowdown());
    second_fence = lock.fence();
    waiter_stats = other.stats();
    if (waited.ok()) lock.release().ignore();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300 * test::slowdown()));
  for (Connection* c : {&cb, &ca, &cc})
    EXPECT_EQ(run(*c, {"CLUSTER", "SETSLOT", s, "NODE", idb}), "OK");
  releaser.join();
  waiter.join();
  ASSERT_TRUE(released.ok()) << released.to_string();
  ASSERT_TRUE(waited.ok()) << waited.to_string();
  EXPECT_GT(second_fence, first_fence) << "the fencing counter moved with the slot";
  EXPECT_GE(client_.stats().tryagain, 1u) << "the release waited for the slot to settle";
  EXPECT_GE(waiter_stats.ask, 1u);
  std::printf("migration: holder ask=%u tryagain=%u; waiter ask=%u tryagain=%u moved=%u\n",
              client_.stats().ask, client_.stats().tryagain, waiter_stats.ask,
              waiter_stats.tryagain, waiter_stats.moved);
  // The first client learns the new owner from MOVED too.
  ASSERT_TRUE(holder.try_acquire().ok()) << client_.last_error();
  EXPECT_EQ(test::serving_port(client_, holder.key()), cluster_->node(sb).port());
  ASSERT_TRUE(holder.release().ok());
  EXPECT_GE(client_.stats().moved, 1u);
}

// The server (index in `servers`) replicating the primary at `port`.
int replica_of(test::RedisClusterSetup& servers, int port) {
  for (int i = 0; i < servers.size(); ++i) {
    const std::string info = test::raw_command(servers.node(i).port(), {"INFO", "replication"});
    if (info.find("master_port:" + std::to_string(port) + "\r\n") != std::string::npos) return i;
  }
  return -1;
}

// Steps `lease` from a poll() loop until `done()` or the operation ends
// (bounded); returns its status.
template <class F>
Status step_until(Lease& lease, Status s, F done) {
  for (int i = 0; i < 4000 && s.code() == ErrorCode::kInProgress && !done(); ++i) {
    pollfd fds[kMaxWaitFds];
    const size_t n = lease.wait_fds(fds, kMaxWaitFds);
    poll(fds, n, 5);
    s = lease.step();
  }
  return s;
}

// Two handles on two nodes confirm grants at once: each WAIT gives back
// its own grant (here the fence), never the other node's.
void check_overlapping_confirms(test::RedisClusterSetup& servers, const ClusterOptions& co) {
  Cluster waiting;
  ASSERT_TRUE(waiting.init(servers.url().c_str(), options(), co).ok());
  ASSERT_TRUE(waiting.refresh(Deadline::after(waiting.clock(), Millis(5000))).ok());
  std::string keys[2];
  for (int i = 0; i < 100000 && keys[1].empty(); ++i) {
    const std::string k = "mix-" + std::to_string(i);
    if (keys[0].empty()) {
      keys[0] = k;
    } else if (waiting.owner_of(key_slot(k.c_str())) !=
               waiting.owner_of(key_slot(keys[0].c_str()))) {
      keys[1] = k;
    }
  }
  Lock a(waiting), b(waiting);
  ASSERT_TRUE(a.init(Bytes(keys[0].data(), keys[0].size())).ok());
  ASSERT_TRUE(b.init(Bytes(keys[1].data(), keys[1].size())).ok());
  const int port_a = test::serving_port(waiting, a.key());
  const int port_b = test::serving_port(waiting, b.key());
  ASSERT_NE(port_a, port_b);
  test::raw_command(port_a, {"DEL", "{" + keys[0] + "}:fence"});
  test::raw_command(port_b, {"SET", "{" + keys[1] + "}:fence", "1000"});
  const int replica_a = replica_of(servers, port_a);
  ASSERT_GE(replica_a, 0);
  servers.node(replica_a).pause();  // a's WAIT stays out
  Status sa = step_until(a, a.start_try_acquire(), [&] {
    return test::raw_command(port_a, {"INFO", "clients"}).find("blocked_clients:1") !=
           std::string::npos;
  });
  ASSERT_EQ(sa.code(), ErrorCode::kInProgress) << sa.to_string() << " " << waiting.last_error();
  const Status sb = step_until(b, b.start_try_acquire(), [] { return false; });
  servers.node(replica_a).resume();
  ASSERT_TRUE(sb.ok()) << sb.to_string() << " " << waiting.last_error();
  EXPECT_EQ(b.fence(), 1001u);
  sa = step_until(a, sa, [] { return false; });
  ASSERT_TRUE(sa.ok()) << sa.to_string() << " " << waiting.last_error();
  EXPECT_EQ(a.fence(), 1u) << "a's WAIT handed back b's grant";
  EXPECT_TRUE(a.release().ok() && b.release().ok());
}

TEST(ClusterFailover, WaitThenFollowPromotedReplicaAfterKill9) {
  // A short node timeout: the replica takes over about a second after the
  // primary dies.
  test::RedisClusterSetup servers(3, 1, 1000);
  ASSERT_TRUE(servers.start()) << "could not build a cluster with replicas";
  // With WAIT: a grant is confirmed by the slot's replica, and fails
  // closed while that replica is stopped.
  Cluster waiting;
  ClusterOptions co;
  co.wait_replicas = 1;
  co.wait_timeout = Millis(300) * test::slowdown();
  ASSERT_TRUE(waiting.init(servers.url().c_str(), options(), co).ok());
  Lock confirmed(waiting);
  ASSERT_TRUE(confirmed.init(Bytes::from_cstr("feeder")).ok());
  ASSERT_TRUE(confirmed.try_acquire().ok()) << waiting.last_error();
  const int old_port = test::serving_port(waiting, confirmed.key());
  const int replica = replica_of(servers, old_port);
  ASSERT_GE(replica, 0);
  servers.node(replica).pause();
  EXPECT_EQ(confirmed.extend(Millis(2000)).code(), ErrorCode::kNoQuorum) << waiting.last_error();
  servers.node(replica).resume();
  EXPECT_EQ(waiting.stats().wait_failures, 1u);
  ASSERT_TRUE(confirmed.release().ok());
  co.wait_timeout = Millis(2000) * test::slowdown();
  check_overlapping_confirms(servers, co);

  Cluster cluster;
  ASSERT_TRUE(cluster.init(servers.url().c_str(), options()).ok());
  Lock lock(cluster);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("feeder")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << cluster.last_error();
  ASSERT_TRUE(lock.release().ok());
  int killed = -1;
  for (int i = 0; i < servers.size(); ++i) {
    if (servers.node(i).port() == old_port) killed = i;
  }
  ASSERT_GE(killed, 0);
  servers.node(killed).kill9();
  // The client re-reads the map from the surviving nodes until the
  // replica has taken the slot over.
  const TimePoint t0 = cluster.clock().now();
  const Status s = lock.acquire(Millis(20000) * test::slowdown());
  const Nanos took = cluster.clock().now() - t0;
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << cluster.last_error();
  EXPECT_EQ(test::serving_port(cluster, lock.key()), servers.node(replica).port());
  EXPECT_GE(cluster.stats().refreshes, 2u);
  std::printf("cluster: kill -9 failover followed in %lld ms\n",
              static_cast<long long>(test::ms(took)));
  ASSERT_TRUE(lock.release().ok());
}

constexpr int kWorkers = 4;
constexpr int kGrantsEach = 250;

int worker(const std::string& url, const std::string& key, test::FencedResource* dev) {
  Cluster cluster;
  if (!cluster.init(url.c_str(), options()).ok()) return test::kWorkerSetupFailed;
  Lock lock(cluster);
  LockOptions lo;
  lo.ttl = Millis(5000 * test::slowdown());
  lo.retry_min = Millis(1);
  lo.retry_max = Millis(20);
  if (!lock.init(Bytes(key.data(), key.size()), lo).ok()) return test::kWorkerInitFailed;
  return test::contend(lock, kGrantsEach, dev);
}

TEST_F(ClusterTest, MutualExclusionAcrossFourProcesses) {
  test::FencedResource* dev = test::FencedResource::create();
  ASSERT_NE(dev, nullptr);
  const std::string key = key_on(client_.owner_of(16383), "shared-device");
  test::run_processes(kWorkers, [&](int) { return worker(cluster_->url(), key, dev); });
  test::expect_exclusive(*dev, kWorkers * kGrantsEach);
  std::printf("cluster mutex: %d grants, %d overlaps, max fence %llu\n", dev->grants.load(),
              dev->overlaps.load(), static_cast<unsigned long long>(dev->max_fence.load()));
}

}  // namespace
}  // namespace edgelock
