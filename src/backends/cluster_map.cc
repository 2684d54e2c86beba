// Cluster slot map: read from CLUSTER SLOTS a few ranges at a time, so a
// map of any size fits the fixed per-connection reply arena; by a blocking
// call, or as steps of the non-blocking face (route_pending()).
#include <cstdio>
#include <cstring>

#include "backends/cluster_scripts.h"
#include "backends/routed_call.h"
#include "base/error_text.h"
#include "edgelock/cluster.h"
#include "edgelock/detail/connection_io.h"

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
  const Status s = conn.init(ep, options_);
  if (!s.ok()) return note(conn, s);
  return static_cast<int>(node_count_++);
}

Status Cluster::read_map(Connection& conn, Deadline deadline) {
  int32_t total = 1;
  for (int32_t first = 0; first < total && first < kClusterSlots; first += kRangesPerPage) {
    char num[24];
    const int n = std::snprintf(num, sizeof num, "%d", static_cast<int>(first));
    const Bytes arg(num, static_cast<size_t>(n));
    const Result<const Reply*> r = conn.eval({&detail::kSlotsPageScript, {}, {&arg, 1}}, deadline);
    if (!r.ok()) return note(conn, r.status());
    EDGELOCK_TRY(apply_page(conn, *r.value(), &total));
  }
  return Status();
}

// One page of the map from `conn`: its ranges into the table, the count
// of ranges into *total.
Status Cluster::apply_page(Connection& conn, const Reply& rep, int32_t* total) {
  if (rep.type != ReplyType::kArray || rep.count < 1 || (rep.count - 1) % 4 != 0 ||
      !is_int(rep.elements[0], 0, kClusterSlots)) {
    set_error(error_, "unexpected CLUSTER SLOTS page");
    return ErrorCode::kProtocol;
  }
  *total = static_cast<int32_t>(rep.elements[0].integer);
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
  return Status();
}

Status Cluster::refresh(Deadline deadline) {
  if (!initialized_) return detail::not_initialized("cluster", error_);
  abandon_refresh();  // a read as steps gives way: this one reads it all
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
        refresh_wanted_ = false;
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

// --- The map read as steps: each page request started on its node and
// moved with non-blocking I/O by the caller's steps (route_pending()).

// kInProgress while a page is out; ok once the map is read; else the last
// node's error (every node known when it began was asked).
Status Cluster::refresh_step() {
  if (!refresh_running_) {
    refresh_running_ = true;
    refresh_paging_ = false;
    refresh_pass_ = 0;
    refresh_node_ = 0;
    refresh_count_ = static_cast<uint8_t>(node_count_);  // pages may add nodes
    refresh_last_ = ErrorCode::kConnectFailed;
  }
  // Each move starts I/O (and returns) or passes to the next node.
  for (size_t i = 0; i < 2 * kMaxClusterNodes + 2; ++i) {
    if (!refresh_paging_) {
      Connection* conn = next_to_ask();
      if (!conn) return end_refresh(refresh_last_);
      refresh_conn_ = conn;
      refresh_first_ = 0;
      refresh_total_ = 1;
      const Status s = start_page(*conn);
      if (!s.ok()) {
        refresh_last_ = note(*conn, s);
        continue;
      }
      refresh_paging_ = true;
    }
    const Status s = refresh_page();
    if (s.code() == ErrorCode::kInProgress) return s;
    if (s.ok()) return end_refresh(s);
    refresh_paging_ = false;
    refresh_last_ = s;
  }
  return ErrorCode::kInProgress;
}

// The next node to ask: connected ones first (no new connection), then
// the others; a node another request occupies is passed over.
Connection* Cluster::next_to_ask() {
  for (; refresh_pass_ < 2; ++refresh_pass_, refresh_node_ = 0) {
    while (refresh_node_ < refresh_count_) {
      Connection& c = nodes_[refresh_node_++];
      if (c.is_connected() != (refresh_pass_ == 0) || detail::io(c).busy()) continue;
      return &c;
    }
  }
  return nullptr;
}

Status Cluster::start_page(Connection& conn) {
  const int n =
      std::snprintf(page_text_, sizeof page_text_, "%d", static_cast<int>(refresh_first_));
  page_arg_ = Bytes(page_text_, static_cast<size_t>(n));
  refresh_until_ = Deadline::after(*clock_, options_.command_timeout);
  return detail::io(conn).start_eval({&detail::kSlotsPageScript, {}, {&page_arg_, 1}},
                                     refresh_until_);
}

// The page out on refresh_conn_: kInProgress while pending (the next one
// started once it is in), ok after the last, else the node's error.
Status Cluster::refresh_page() {
  Connection& conn = *refresh_conn_;
  detail::ConnectionIo io = detail::io(conn);
  // A page comes back within a step of the next one's start only if the
  // node answers at once: a few rounds per step, then the caller's loop.
  for (int round = 0; round < 4; ++round) {
    Result<const Reply*> r = io.advance();
    if (r.ok() && !r.value()) {
      if (!refresh_until_.expired(*clock_)) return ErrorCode::kInProgress;
      r = io.abandon();  // a stalled node: ask the next
    }
    if (!r.ok()) return note(conn, r.status());
    EDGELOCK_TRY(apply_page(conn, *r.value(), &refresh_total_));
    refresh_first_ += kRangesPerPage;
    if (refresh_first_ >= refresh_total_ || refresh_first_ >= kClusterSlots) return Status();
    const Status s = start_page(conn);
    if (!s.ok()) return note(conn, s);
  }
  return ErrorCode::kInProgress;
}

// The read is over with `s`: read or not, the steps route by the map as
// it is now (a failed read is tried again after the next lost node).
Status Cluster::end_refresh(Status s) {
  refresh_running_ = false;
  refresh_paging_ = false;
  refresh_wanted_ = false;
  if (s.ok()) ++stats_.refreshes;
  return s;
}

// A blocking read takes over: the page in flight is dropped (its
// connection closed, since its reply may still come).
void Cluster::abandon_refresh() {
  if (refresh_paging_ && detail::io(*refresh_conn_).busy()) {
    detail::io(*refresh_conn_).abandon().ignore();
  }
  refresh_running_ = false;
  refresh_paging_ = false;
}

}  // namespace edgelock
