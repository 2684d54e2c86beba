// Cluster slot map: read from CLUSTER SLOTS a few ranges at a time, so a
// map of any size fits the fixed per-connection reply arena.
#include <cstdio>
#include <cstring>

#include "backends/cluster_scripts.h"
#include "base/error_text.h"
#include "edgelock/cluster.h"

namespace edgelock {

namespace {

// Ranges per page: 1 + 1 + 4 * 3 = 14 reply nodes, within kReplyNodes.
constexpr int kRangesPerPage = 3;
static_assert(2 + 4 * kRangesPerPage <= kReplyNodes, "a page must fit the reply arena");

bool is_int(const Reply& r, int64_t lo, int64_t hi) {
  return r.type == ReplyType::kInteger && r.integer >= lo && r.integer <= hi;
}

}  // namespace

Result<int> Cluster::add_node(const char* host, size_t host_len, uint16_t port) {
  if (host_len > kMaxHostLen) {
    set_error(error_, "cluster node host name too long");
    return ErrorCode::kBufferTooSmall;
  }
  for (size_t i = 0; i < node_count_; ++i) {
    const Endpoint& ep = nodes_[i].endpoint();
    if (ep.port == port && std::strlen(ep.host) == host_len &&
        std::memcmp(ep.host, host, host_len) == 0) {
      return static_cast<int>(i);
    }
  }
  if (node_count_ >= kMaxClusterNodes) {
    set_error(error_, "more than %zu cluster nodes", kMaxClusterNodes);
    return ErrorCode::kBufferTooSmall;
  }
  Endpoint ep = creds_;
  ep.scheme = Scheme::kTcp;
  std::memcpy(ep.host, host, host_len);
  ep.host[host_len] = '\0';
  ep.port = port;
  ep.db = 0;
  Connection& conn = nodes_[node_count_];
  const Status s = conn.setup(ep, options_);
  if (!s.ok()) return note(conn, s);
  return static_cast<int>(node_count_++);
}

Status Cluster::read_map(Connection& conn, Deadline deadline) {
  int64_t total = 1;
  for (int64_t first = 0; first < total && first < kClusterSlots; first += kRangesPerPage) {
    char num[24];
    const int n = std::snprintf(num, sizeof num, "%lld", static_cast<long long>(first));
    const Bytes arg(num, static_cast<size_t>(n));
    const Result<const Reply*> r = conn.eval({&detail::kSlotsPageScript, {}, {&arg, 1}}, deadline);
    if (!r.ok()) return note(conn, r.status());
    const Reply& rep = *r.value();
    if (rep.type != ReplyType::kArray || rep.count < 1 || (rep.count - 1) % 4 != 0 ||
        !is_int(rep.elements[0], 0, kClusterSlots)) {
      set_error(error_, "unexpected CLUSTER SLOTS page");
      return ErrorCode::kProtocol;
    }
    total = rep.elements[0].integer;
    for (size_t i = 1; i + 3 < rep.count; i += 4) {
      const Reply* e = &rep.elements[i];
      if (!is_int(e[0], 0, kClusterSlots - 1) || !is_int(e[1], e[0].integer, kClusterSlots - 1) ||
          e[2].type != ReplyType::kString || !is_int(e[3], 1, 65535)) {
        set_error(error_, "unexpected CLUSTER SLOTS range");
        return ErrorCode::kProtocol;
      }
      // An empty host (or "?") means: the address we reached this node at.
      const bool unknown = e[2].len == 0 || (e[2].len == 1 && e[2].str[0] == '?');
      const char* host = unknown ? conn.endpoint().host : e[2].str;
      const size_t len = unknown ? std::strlen(host) : e[2].len;
      const Result<int> node = add_node(host, len, static_cast<uint16_t>(e[3].integer));
      if (!node.ok()) return node.status();
      std::memset(owner_ + e[0].integer, node.value(),
                  static_cast<size_t>(e[1].integer - e[0].integer + 1));
    }
  }
  return Status();
}

Status Cluster::refresh(Deadline deadline) {
  if (!is_setup_) {
    set_error(error_, "cluster used before setup()");
    return ErrorCode::kInvalidArgument;
  }
  Status last = ErrorCode::kConnectFailed;
  const size_t count = node_count_;  // read_map may add nodes
  // Nodes already connected first: asking them costs no new connection.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < count; ++i) {
      if (nodes_[i].is_connected() != (pass == 0)) continue;
      if (deadline.expired(*clock_)) return ErrorCode::kTimeout;
      last = read_map(nodes_[i], deadline);
      if (last.ok()) {
        ++stats_.refreshes;
        map_stale_ = false;
        return last;
      }
    }
  }
  return last;
}

Status Cluster::connect_primaries(Deadline deadline) {
  bool used[kMaxClusterNodes] = {};
  for (size_t s = 0; s < kClusterSlots; ++s) {
    if (owner_[s] != kNoOwner) used[owner_[s]] = true;
  }
  for (size_t i = 0; i < node_count_; ++i) {
    if (!used[i] || nodes_[i].is_connected()) continue;
    const Status s = nodes_[i].connect(deadline);
    if (!s.ok()) return note(nodes_[i], s);
  }
  return Status();
}

}  // namespace edgelock
