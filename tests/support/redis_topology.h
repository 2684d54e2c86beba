#pragma once
// Test support: a throwaway Redis Cluster (N primaries, built with
// `redis-cli --cluster create`) and a Sentinel set-up (primary, replica,
// three sentinels), all on free loopback ports, stopped by PID.

#include <memory>
#include <string>
#include <vector>

#include "edgelock/backend.h"
#include "edgelock/connection.h"
#include "redis_server.h"

namespace edgelock {
namespace test {

/// The port of the node that serves `key` on `backend` now.
inline int serving_port(Backend& backend, Bytes key) {
  return backend.connection_for(key).endpoint().port;
}

class RedisClusterSetup {
 public:
  /// `replicas` per primary (redis-cli --cluster-replicas). The node
  /// timeout is generous by default, so a loaded machine does not make the
  /// nodes flag each other as failed; a failover test passes a short one.
  explicit RedisClusterSetup(int primaries = 3, int replicas = 0, int node_timeout_ms = 5000);
  /// Starts the nodes, creates the cluster and waits (bounded) until every
  /// node reports cluster_state:ok and every replica is in sync. On a
  /// failure, says which step failed on stderr.
  bool start();
  /// redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...
  std::string url() const;
  int size() const { return static_cast<int>(nodes_.size()); }
  RedisServer& node(int i) { return *nodes_[static_cast<size_t>(i)]; }
  /// The node's cluster id (CLUSTER MYID).
  std::string node_id(int i);

 private:
  bool fail(const char* what, const std::string& log = "");

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  int replicas_ = 0;
};

class SentinelSetup {
 public:
  static constexpr const char* kMaster = "edge";
  SentinelSetup();
  /// Starts primary, replica (in sync) and three sentinels that know the
  /// replica and each other (bounded: ~15 s).
  bool start();
  /// redis-sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/edge
  std::string url() const;
  RedisServer& primary() { return *primary_; }
  RedisServer& replica() { return *replica_; }
  RedisServer& sentinel(int i) { return *sentinels_[static_cast<size_t>(i)]; }
  /// The primary's port as sentinel 0 reports it (0 if unknown).
  int reported_primary_port();
  /// SENTINEL FAILOVER through sentinel 0; the raw reply ("+OK\r\n").
  std::string failover();

 private:
  std::unique_ptr<RedisServer> primary_;
  std::unique_ptr<RedisServer> replica_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
};

}  // namespace test
}  // namespace edgelock
