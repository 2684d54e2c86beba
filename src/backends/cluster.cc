// Cluster routing: each command goes to its key's slot owner; MOVED, ASK,
// TRYAGAIN and CLUSTERDOWN replies are followed within the deadline.
#include "edgelock/cluster.h"

#include <cstdlib>
#include <cstring>

#include "backends/replica_wait.h"
#include "backends/routed_call.h"
#include "backends/topology_url.h"
#include "base/error_text.h"
#include "base/lock_keys.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/lease_core.h"

namespace edgelock {

namespace {

// Pause between TRYAGAIN / CLUSTERDOWN rounds: a migration or failover
// step takes milliseconds to seconds; the deadline bounds the total.
constexpr Nanos kSettlePause = Millis(10);
// How often a request waiting for the map read as steps polls it: the
// read's page requests give the caller's loop no fd of their own.
constexpr Nanos kRefreshPoll = Millis(2);

}  // namespace

// A seed of the URL (detail::parse_host_list()'s callback).
Status Cluster::add_seed(void* self, const Endpoint& host) {
  Cluster* c = static_cast<Cluster*>(self);
  return c->add_node(host.host, std::strlen(host.host), host.port).status();
}

Status Cluster::init(const char* url, const ConnectionOptions& options,
                     const ClusterOptions& cluster_options) {
  for (size_t i = 0; i < node_count_; ++i) nodes_[i].close();
  node_count_ = 0;
  initialized_ = false;
  std::memset(owner_, kNoOwner, sizeof owner_);
  stats_ = ClusterStats();
  refresh_wanted_ = true;  // the first start/step request reads the map
  refresh_running_ = false;
  refresh_paging_ = false;
  options_ = options;
  cluster_options_ = cluster_options;
  clock_ = options.clock ? options.clock : &default_clock();
  detail::HostList list;
  const char* why = nullptr;
  if (cluster_options.wait_replicas < 0 || cluster_options.wait_timeout <= Nanos::zero()) {
    set_error(error_, "wait_replicas must be >= 0 and wait_timeout > 0");
    return ErrorCode::kInvalidArgument;
  }
  if (options.transport) {
    set_error(error_, "a cluster opens many connections: options.transport serves only one");
    return ErrorCode::kInvalidArgument;
  }
  // Credentials come first in the URL, so they are known before any seed.
  creds_ = Endpoint();
  Status s = detail::parse_host_list(url, "redis-cluster://", nullptr, nullptr, &list, &why);
  if (s.ok() && list.path[0] != '\0') {
    why = "a cluster URL has no path (cluster mode has only db 0)";
    s = ErrorCode::kInvalidArgument;
  }
  if (s.ok()) {
    creds_ = list.creds;
    s = detail::parse_host_list(url, "redis-cluster://", add_seed, this, &list, &why);
  }
  if (!s.ok()) {
    set_error(error_, "bad cluster URL: %s", why ? why : "invalid");
    node_count_ = 0;
    return s;
  }
  initialized_ = true;
  return Status();
}

Status Cluster::check_key(Bytes key) {
  // A '{' without a tag: each companion then hashes whole, so one that
  // lands in the key's slot says nothing of the others (a FairLock's
  // wake lists are named per waiter).
  if (key.size > 0 && std::memchr(key.data, '{', key.size) && !detail::has_hash_tag(key)) {
    set_error(error_, "key has '{' but no hash tag covering its companion keys");
    return ErrorCode::kInvalidArgument;
  }
  uint8_t companion[kMaxKeyLen + 8];
  const Result<size_t> n = detail::companion_key(key, ":fence", companion, sizeof companion);
  if (!n.ok()) return n.status();
  if (key_slot(key) != key_slot(Bytes(companion, n.value()))) {
    set_error(error_, "key has '{' or '}' but no hash tag covering its companion keys");
    return ErrorCode::kInvalidArgument;
  }
  return Status();
}

int Cluster::pick_node(uint16_t slot) const {
  // An unknown slot goes to any node; its MOVED reply names the owner.
  return owner_[slot] == kNoOwner ? 0 : owner_[slot];
}

Connection& Cluster::connection_for(Bytes key) { return nodes_[pick_node(key_slot(key))]; }

Status Cluster::note(Connection& conn, Status s) {
  set_error(error_, "%s", conn.last_error());
  return s;
}

// The routed steps every lease's request takes (Cluster::route_for() and
// the rest), driven to the end.
Result<const Reply*> Cluster::eval(const ScriptCall& call, Deadline deadline) {
  if (!initialized_) return detail::not_initialized("cluster", error_);
  if (call.keys.empty()) {
    set_error(error_, "eval without a key to route by");
    return ErrorCode::kInvalidArgument;
  }
  return detail::call_routed(*this, call.keys[0], call, deadline);
}

// A node serves one request at a time, so its own storage suffices.
detail::WriteConfirm Cluster::confirmer(const Connection& node) {
  size_t i = 0;
  while (i + 1 < node_count_ && &nodes_[i] != &node) ++i;  // routes reach only nodes_
  return detail::confirm_over(cluster_options_, stats_, confirmed_[i], wait_sent_[i], error_);
}

Result<const Reply*> Cluster::start_confirm(Connection& node, const Reply* reply,
                                            Deadline deadline) {
  return confirmer(node).start(node, reply, deadline);
}

Result<const Reply*> Cluster::end_confirm(Connection& node, const Result<const Reply*>& wait) {
  return confirmer(node).end(node, wait);
}

Result<const Reply*> Cluster::command(Bytes key, Span<const Bytes> args, Deadline deadline) {
  if (!initialized_) return detail::not_initialized("cluster", error_);
  return detail::call_routed(*this, key, detail::plain_command(args), deadline);
}

// The node a MOVED or ASK from node *target names (added if new); a MOVED
// makes it the slot's owner. No I/O.
Status Cluster::redirected(uint16_t slot, bool moved, int* target) {
  // Decoded when the reply was read, from its whole text.
  const resp::Redirect& r = detail::io(nodes_[*target]).redirect();
  if (!r.valid || r.slot != slot) return ErrorCode::kServerError;
  if (r.host.size > kMaxHostLen) {
    set_error(error_, "redirect to a host name longer than %u bytes",
              static_cast<unsigned>(kMaxHostLen));
    return ErrorCode::kServerError;
  }
  char h[kMaxHostLen + 1];
  // An empty host means "the node that answered" (its address unknown to it).
  const Endpoint& from = nodes_[*target].endpoint();
  const int n = r.host.size ? std::snprintf(h, sizeof h, "%.*s", static_cast<int>(r.host.size),
                                            reinterpret_cast<const char*>(r.host.data))
                            : std::snprintf(h, sizeof h, "%s", from.host);
  const Result<int> node = add_node(h, static_cast<size_t>(n), r.port);
  if (!node.ok()) return node.status();
  if (moved) {
    ++stats_.moved;
    owner_[slot] = static_cast<uint8_t>(node.value());
  } else {
    ++stats_.ask;
  }
  *target = node.value();
  return Status();
}

// --- Non-blocking routing: no I/O here, the caller's loop moves the bytes.

const detail::LeaseRouter* Cluster::router() const {
  return initialized_ && node_count_ > 0 ? &detail::LeaseCore::kRouter : nullptr;
}

Connection* Cluster::route_for(Bytes key) {
  // While the map is to be read (first use, a lost node), requests wait
  // for route_pending()'s steps.
  if (!router() || refresh_wanted_ || refresh_running_) return nullptr;
  return &nodes_[pick_node(key_slot(key))];
}

RouteNext Cluster::route_pending(Bytes key) {
  if (!router()) return detail::unrouted("cluster", error_);
  RouteNext next;
  if (refresh_wanted_ || refresh_running_) {
    const Status s = refresh_step();
    if (s.code() == ErrorCode::kInProgress) {
      next.pause = kRefreshPoll;
      return next;
    }
    // Read or not (every node failed): route by the map as it is.
  }
  next.node = &nodes_[pick_node(key_slot(key))];
  return next;
}

RouteNext Cluster::on_routed_error(Connection& node, Bytes key, Status s) {
  RouteNext next;
  next.status = note(node, s);
  const int from = static_cast<int>(&node - nodes_);
  if (from < 0 || static_cast<size_t>(from) >= node_count_) return next;
  const uint16_t slot = key_slot(key);
  const ErrorCode code = s.code();
  if (code == ErrorCode::kMoved || code == ErrorCode::kAsk) {
    int target = from;
    const Status f = redirected(slot, code == ErrorCode::kMoved, &target);
    if (!f.ok()) {
      next.status = f;
      return next;
    }
    next.node = &nodes_[target];
    next.asking = code == ErrorCode::kAsk;
    return next;
  }
  if (code == ErrorCode::kTryAgain) {
    ++stats_.tryagain;
    next.pause = kSettlePause;
    return next;
  }
  if (traits(code).connection_failed) {
    // The node may be gone (a failover): the map is read again, as steps
    // before the next request routes; should that read fail, the slot goes
    // to the next known node, whose MOVED names the owner.
    refresh_wanted_ = true;  // the next request reads the map first, as steps
    if (node_count_ > 1) owner_[slot] = static_cast<uint8_t>((from + 1) % node_count_);
  }
  return next;
}

}  // namespace edgelock
