#pragma once
/// @file cluster.h
/// Locks in a Redis Cluster. The slot map is read with CLUSTER SLOTS into a
/// fixed table (one byte per slot) and every lock key goes to its slot's
/// primary; MOVED (slot moved: its owner updated) and ASK (slot being
/// migrated: ASKING, then the command) redirects and TRYAGAIN (a multi-key
/// script mid-migration) are followed within the operation's deadline.
/// A failed connection to a node marks the map stale: it is read again
/// before the next command, so a cluster failover is followed too.
/// The non-blocking face (start_*()/step(), docs/nonblocking.md) is served
/// after init(): each request goes to the slot's owner from the
/// map, and MOVED, ASK (ASKING and the script in one write) and TRYAGAIN
/// (a pause state) are followed by the caller's loop, at most
/// kMaxRedirects times and within the request's deadline. Nothing blocks
/// there: before the first request, and after a node failed, the map is
/// read as steps of the caller's loop (the requests wait as a pause,
/// polling it every 2 ms: CLUSTER SLOTS pages from each known node in
/// turn, connected ones first, each given up after one command_timeout, so
/// a stalled node costs the loop time, never a long step); if no node
/// answers, the requests go by the map as it is (a seed while none was
/// read, the next known node for a failed node's slot), and the MOVED
/// they get names the owner. Redirects update the map too. One exception
/// may block: the first connect to a node given by host name (a seed, or a
/// redirect or map naming one) looks the name up (Connection::resolve());
/// an IP, as Redis sends unless cluster-preferred-endpoint-type is
/// hostname, is not looked up.
/// Only opening a node's first connection allocates (see Memory).
/// With wait_replicas > 0 a grant's WAIT is one more step on its node.
///
/// A lock's companion keys share its hash slot (the lock key is used as a
/// hash tag), so no script crosses slots.
///
/// Memory: kMaxClusterNodes Connections plus 16 KB of slot map, all inside
/// the object. Connections are opened lazily, on first use of a node (that
/// is set-up and allocates); refresh() + connect_primaries() do it up front.
///
/// Usage:
///   Cluster cluster;
///   cluster.init("redis-cluster://10.0.0.1:7000,10.0.0.2:7000");
///   Lock lock(cluster);
///   lock.init(Bytes::from_cstr("pump-3"));

#include <cstddef>
#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/connection.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/limits.h"

namespace edgelock {

namespace detail {
struct WriteConfirm;
}  // namespace detail

struct ClusterOptions {
  /// After an acquire or extend that succeeded on a slot's primary, WAIT
  /// until this many of its replicas have it; fewer acknowledgements fail
  /// the operation with kNoQuorum (an acquire is released again). 0 = off.
  int wait_replicas = 0;
  /// Longest time WAIT may block (also capped by the operation's deadline).
  Nanos wait_timeout = Millis(200);
};

/// Counters kept by a Cluster (fixed size, no heap).
struct ClusterStats {
  uint32_t refreshes = 0;      ///< Slot maps read successfully.
  uint32_t moved = 0;          ///< MOVED redirects followed.
  uint32_t ask = 0;            ///< ASK redirects followed.
  uint32_t tryagain = 0;       ///< TRYAGAIN replies waited out.
  uint32_t wait_failures = 0;  ///< WAITs with too few acknowledgements.
};

class Cluster final : public Backend {
 public:
  Cluster() = default;
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  /// Parses `redis-cluster://[user:pass@]host:port[,host:port...]` (the
  /// seeds; credentials apply to every node) and keeps the options. No I/O:
  /// the slot map is read at first use (or by refresh()), and a seed given
  /// by host name is looked up by its first connect.
  /// Errors: kInvalidArgument (malformed URL, no seeds, a path, bad
  /// cluster options, options.transport set),
  /// kBufferTooSmall (a part exceeds its capacity, more than
  /// kMaxClusterNodes seeds).
  Status init(const char* url, const ConnectionOptions& options = {},
              const ClusterOptions& cluster_options = {});

  /// Reads the slot map from the known nodes in turn, seeds included,
  /// until one answers. Connects to the node it asks (allocates). Slots it
  /// reports overwrite the table; others keep their last owner.
  /// Errors: kBufferTooSmall (more primaries than kMaxClusterNodes, or a
  /// host name that does not fit), kProtocol (unexpected CLUSTER SLOTS
  /// shape), kInvalidArgument (before init()), or the last node's
  /// Connection::command() error.
  Status refresh(Deadline deadline);
  /// Connects every primary in the map now, so later operations allocate
  /// nothing. Errors: as Connection::connect() for the first that fails.
  Status connect_primaries(Deadline deadline);

  /// Index of the node owning `slot`, or -1 if unknown.
  int owner_of(uint16_t slot) const { return owner_[slot] == kNoOwner ? -1 : owner_[slot]; }
  size_t node_count() const { return node_count_; }
  Connection& node(size_t i) { return nodes_[i]; }
  const ClusterStats& stats() const { return stats_; }

  Clock& clock() const override { return *clock_; }
  const char* last_error() const override { return error_; }

 private:
  /// The index of the node at host:port, added (its connection given its
  /// init(), not connected) if new. Errors: kBufferTooSmall
  /// (kMaxClusterNodes reached, host too long).
  Result<int> add_node(const char* host, size_t host_len, uint16_t port);
  static Status add_seed(void* self, const Endpoint& host);
  // Backend, for the primitives (they call these through Backend&):
  // kInvalidArgument from check_key() for a key whose companion keys would
  // hash to another slot (a '{' without a valid tag, or a '}' that would
  // end the tag early). eval()/command() are the routed steps below driven
  // to their end (detail::call_routed()): one way to route, blocking or not.
  Status check_key(Bytes key) override;
  Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) override;
  Result<const Reply*> command(Bytes key, Span<const Bytes> args, Deadline deadline) override;
  Connection& connection_for(Bytes key) override;
  Nanos command_timeout() const override { return options_.command_timeout; }
  // Non-blocking routing (Backend): served after init().
  const detail::LeaseRouter* router() const override;
  Connection* route_for(Bytes key) override;
  RouteNext route_pending(Bytes key) override;
  RouteNext on_routed_error(Connection& node, Bytes key, Status s) override;
  Result<const Reply*> start_confirm(Connection& node, const Reply* reply,
                                     Deadline deadline) override;
  Result<const Reply*> end_confirm(Connection& node, const Result<const Reply*>& wait) override;

  static constexpr uint8_t kNoOwner = 0xFF;
  Status redirected(uint16_t slot, bool moved, int* target);
  Status read_map(Connection& conn, Deadline deadline);
  Status apply_page(Connection& conn, const Reply& rep, int32_t* total);
  // The map read as steps (route_pending(), src/backends/cluster_map.cc).
  Status refresh_step();
  Status refresh_page();
  Status start_page(Connection& conn);
  Connection* next_to_ask();
  Status end_refresh(Status s);
  void abandon_refresh();
  Status note(Connection& conn, Status s);
  detail::WriteConfirm confirmer(const Connection& node);  // WAIT on `node` (replica_wait.h)
  int pick_node(uint16_t slot) const;

  Connection nodes_[kMaxClusterNodes];
  size_t node_count_ = 0;
  uint8_t owner_[kClusterSlots];  // node index, or kNoOwner (check_config.h bounds the nodes)
  Endpoint creds_;                // user/password for every node
  ConnectionOptions options_;
  ClusterOptions cluster_options_;
  // Per node: a reply its WAIT confirms, with its elements, and the WAIT's
  // timeout. Handles on different nodes may be confirming at once.
  Reply confirmed_[kMaxClusterNodes][4];
  Millis wait_sent_[kMaxClusterNodes] = {};
  Clock* clock_ = &default_clock();
  bool initialized_ = false;
  // The map read as steps: wanted before the steps route (first use, a
  // lost node), and where it is (a page out on refresh_conn_).
  bool refresh_wanted_ = true;
  bool refresh_paging_ = false;  // a page request is out on refresh_conn_
  bool refresh_running_ = false;
  uint8_t refresh_pass_ = 0;   // 0: connected nodes, 1: the others
  uint8_t refresh_node_ = 0;   // the next node of the pass to ask
  uint8_t refresh_count_ = 0;  // nodes known when the read began
  Status refresh_last_;
  int32_t refresh_first_ = 0;  // the page's first range
  int32_t refresh_total_ = 1;  // ranges the node reported
  char page_text_[8] = {};     // refresh_first_ as text, the page's argument
  Bytes page_arg_;
  Connection* refresh_conn_ = nullptr;
  Deadline refresh_until_ = Deadline::never();  // the page's deadline
  ClusterStats stats_;
  char error_[kErrorTextSize] = {};
};

}  // namespace edgelock
