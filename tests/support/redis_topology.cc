#include "redis_topology.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace edgelock {
namespace test {

namespace {

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Polls `ok` every 50 ms for at most `ms`.
template <typename F>
bool wait_until(int ms, F ok) {
  for (int waited = 0; waited <= ms * slowdown(); waited += 50) {
    if (ok()) return true;
    sleep_ms(50);
  }
  return false;
}

}  // namespace

RedisClusterSetup::RedisClusterSetup(int primaries, int replicas, int node_timeout_ms)
    : replicas_(replicas) {
  for (int i = 0; i < primaries * (1 + replicas); ++i) {
    nodes_.emplace_back(
        new RedisServer({"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-node-timeout", std::to_string(node_timeout_ms),
                         "--repl-diskless-sync-delay", "0"}));
  }
}

bool RedisClusterSetup::start() {
  for (auto& n : nodes_) {
    if (!n->start()) return fail("a node did not start");
  }
  const std::string cli = cli_binary();
  if (cli.empty())
    return fail("no cli next to EDGELOCK_TEST_SERVER (its name must end in -server)");
  std::vector<std::string> cmd = {cli, "--cluster", "create"};
  for (auto& n : nodes_) cmd.push_back("127.0.0.1:" + std::to_string(n->port()));
  cmd.insert(cmd.end(), {"--cluster-replicas", std::to_string(replicas_), "--cluster-yes"});
  const std::string create_log = nodes_[0]->dir() + "/create.log";
  if (run_program(cmd, create_log, 60000 * slowdown()) != 0)
    return fail("--cluster create failed", create_log);
  const bool settled = wait_until(20000, [&] {
    for (auto& n : nodes_) {
      if (!contains(raw_command(n->port(), {"CLUSTER", "INFO"}), "cluster_state:ok")) return false;
      const std::string repl = raw_command(n->port(), {"INFO", "replication"});
      if (!contains(repl, "role:master") && !contains(repl, "master_link_status:up")) return false;
    }
    return true;
  });
  return settled ? true : fail("the cluster did not settle", create_log);
}

bool RedisClusterSetup::fail(const char* what, const std::string& log) {
  std::fprintf(stderr, "cluster setup: %s\n", what);
  if (!log.empty()) std::fprintf(stderr, "%s\n", file_tail(log, 1500).c_str());
  for (auto& n : nodes_) {
    std::fprintf(stderr, "node %d: %s\n", n->port(),
                 file_tail(n->dir() + "/redis.log", 400).c_str());
  }
  return false;
}

std::string RedisClusterSetup::url() const {
  std::string u = "redis-cluster://" + acl_credentials();  // the ACL user, if any
  for (size_t i = 0; i < nodes_.size(); ++i) {
    u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(nodes_[i]->port());
  }
  return u;
}

std::string RedisClusterSetup::node_id(int i) {
  // "$40\r\n<id>\r\n"
  const std::string r = raw_command(node(i).port(), {"CLUSTER", "MYID"});
  const size_t start = r.find("\r\n");
  return start == std::string::npos ? "" : r.substr(start + 2, 40);
}

SentinelSetup::SentinelSetup() {
  // No 5 s diskless-sync delay: the replica syncs at once.
  primary_.reset(new RedisServer({"--repl-diskless-sync-delay", "0"}));
  for (int i = 0; i < 3; ++i) sentinels_.emplace_back(new RedisServer({"--sentinel"}));
}

bool SentinelSetup::start() {
  if (!primary_->start()) return false;
  const std::string pport = std::to_string(primary_->port());
  replica_.reset(new RedisServer({"--replicaof", "127.0.0.1", pport}));
  if (!replica_->start()) return false;
  const bool synced = wait_until(10000, [&] {
    return contains(raw_command(replica_->port(), {"INFO", "replication"}),
                    "master_link_status:up");
  });
  if (!synced) return false;
  // Short timings so a failover takes about a second.
  const std::string conf = std::string("sentinel monitor ") + kMaster + " 127.0.0.1 " + pport +
                           " 2\n" + "sentinel down-after-milliseconds " + kMaster + " 400\n" +
                           "sentinel failover-timeout " + kMaster + " 3000\n" +
                           "sentinel parallel-syncs " + kMaster + " 1\n";
  for (auto& s : sentinels_) {
    if (!s->set_config(conf) || !s->start()) return false;
  }
  // Each sentinel must know the replica and the two other sentinels.
  return wait_until(15000, [&] {
    for (auto& s : sentinels_) {
      const std::string info = raw_command(s->port(), {"INFO", "sentinel"});
      if (!contains(info, "slaves=1,sentinels=3")) return false;
    }
    return true;
  });
}

std::string SentinelSetup::url() const {
  // The ACL user, if any, for the primary (the sentinels have no ACL file).
  std::string u = "redis-sentinel://" + acl_credentials();
  for (size_t i = 0; i < sentinels_.size(); ++i) {
    u += (i ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinels_[i]->port());
  }
  return u + "/" + kMaster;
}

int SentinelSetup::reported_primary_port() {
  // *2\r\n$9\r\n127.0.0.1\r\n$5\r\n12345\r\n
  const std::string r =
      raw_command(sentinels_[0]->port(), {"SENTINEL", "get-master-addr-by-name", kMaster});
  const size_t last = r.rfind("\r\n", r.size() - 3);
  return last == std::string::npos ? 0 : std::atoi(r.c_str() + last + 2);
}

std::string SentinelSetup::failover() {
  return raw_command(sentinels_[0]->port(), {"SENTINEL", "FAILOVER", kMaster});
}

}  // namespace test
}  // namespace edgelock
