// Sentinel routing: find the primary through the sentinels, verify it with
// ROLE, follow failovers, and optionally confirm writes with WAIT.
#include "edgelock/sentinel.h"

#include <cstdio>
#include <cstring>

#include "backends/replica_wait.h"
#include "backends/routed_call.h"
#include "backends/sentinel_rules.h"
#include "backends/topology_url.h"
#include "base/error_text.h"
#include "edgelock/detail/lease_core.h"

namespace edgelock {

namespace {

struct SentinelList {
  Endpoint* out;
  size_t count;
  const SentinelOptions* options;
};

bool copy_cstr(char* dst, size_t cap, const char* src) {
  const size_t n = src ? std::strlen(src) : 0;
  if (n > cap) return false;
  if (n) std::memcpy(dst, src, n);
  dst[n] = '\0';
  return true;
}

Status add_sentinel(void* ctx, const Endpoint& host) {
  SentinelList* list = static_cast<SentinelList*>(ctx);
  if (list->count >= kMaxSentinels) return ErrorCode::kInvalidArgument;
  Endpoint& ep = list->out[list->count];
  ep = host;
  const SentinelOptions& o = *list->options;
  if (!copy_cstr(ep.user, kMaxUserLen, o.sentinel_user) ||
      !copy_cstr(ep.password, kMaxPasswordLen, o.sentinel_password)) {
    return ErrorCode::kBufferTooSmall;
  }
  ep.has_password = o.sentinel_password != nullptr;
  ++list->count;
  return Status();
}

// "NAME" or "NAME?db=N" -> name and db.
Status parse_name(const char* path, char* name, int* db, const char** why) {
  const char* q = std::strchr(path, '?');
  const size_t n = q ? static_cast<size_t>(q - path) : std::strlen(path);
  if (n == 0 || std::memchr(path, '/', n)) {
    *why = "need /MASTER_NAME after the sentinels";
    return ErrorCode::kInvalidArgument;
  }
  if (n > kMaxMasterNameLen) {
    *why = "master name too long";
    return ErrorCode::kBufferTooSmall;
  }
  std::memcpy(name, path, n);
  name[n] = '\0';
  if (!q) return Status();
  char url[40];
  Endpoint ep;
  if (std::strncmp(q + 1, "db=", 3) != 0 || std::strlen(q + 4) > 9) {
    *why = "only ?db=N is supported";
    return ErrorCode::kInvalidArgument;
  }
  std::snprintf(url, sizeof url, "redis://x/%s", q + 4);
  EDGELOCK_TRY(parse_url(url, &ep, why));
  *db = ep.db;
  return Status();
}

}  // namespace

Status Sentinel::init(const char* url, const ConnectionOptions& options,
                      const SentinelOptions& sentinel_options) {
  probe_.close();
  primary_.close();
  lookup_ = Lookup::kIdle;
  initialized_ = false;
  stale_ = true;
  const char* why = nullptr;
  Status s;
  if (sentinel_options.wait_replicas < 0 || sentinel_options.wait_timeout <= Nanos::zero() ||
      sentinel_options.retry_pause <= Nanos::zero() ||
      sentinel_options.recheck_interval < Nanos::zero()) {
    why = "wait_replicas >= 0, wait_timeout > 0, retry_pause > 0, recheck_interval >= 0";
    s = ErrorCode::kInvalidArgument;
  }
  if (s.ok() && options.transport) {
    why = "sentinel opens many connections: options.transport serves only one";
    s = ErrorCode::kInvalidArgument;
  }
  SentinelList list{sentinels_, 0, &sentinel_options};
  detail::HostList hosts;
  if (s.ok()) {
    s = detail::parse_host_list(url, "redis-sentinel://", add_sentinel, &list, &hosts, &why);
  }
  creds_ = hosts.creds;
  if (s.ok()) s = parse_name(hosts.path, name_, &creds_.db, &why);
  // Validates the timeouts once, the way every later init() will see them.
  if (s.ok() && list.count > 0) s = probe_.init(sentinels_[0], options);
  // The primary's address comes from the sentinels; until then the
  // connection already carries the options (its clock is Lock's clock).
  if (s.ok()) s = primary_.init(creds_, options);
  if (!s.ok()) {
    set_error(error_, "bad sentinel URL or options: %s", why ? why : probe_.last_error());
    sentinel_count_ = 0;
    return s;
  }
  sentinel_count_ = list.count;
  preferred_ = 0;
  options_ = options;
  sentinel_options_ = sentinel_options;
  clock_ = options.clock ? options.clock : &default_clock();
  stats_ = SentinelStats();
  verified_port_ = 0;
  initialized_ = true;
  return Status();
}

Status Sentinel::note(Connection& conn, Status s) {
  set_error(error_, "%s", conn.last_error());
  return s;
}

Status Sentinel::aim_probe(size_t index) {
  const Endpoint& sentinel = sentinels_[index];
  const Endpoint& cur = probe_.endpoint();
  // Keep the connection to a sentinel that answered before.
  if (cur.port == sentinel.port && std::strcmp(cur.host, sentinel.host) == 0) return Status();
  return probe_.init(sentinel, options_);
}

Status Sentinel::ask(size_t index, Deadline deadline, Endpoint* primary) {
  EDGELOCK_TRY(aim_probe(index));
  const Bytes args[3] = {Bytes::from_cstr("SENTINEL"), Bytes::from_cstr("get-master-addr-by-name"),
                         Bytes::from_cstr(name_)};
  const Deadline d = deadline.min(Deadline::after(*clock_, options_.command_timeout));
  const Result<const Reply*> r = probe_.command(args, d);
  if (!r.ok()) return note(probe_, r.status());
  return parse_primary(*r.value(), primary);
}

Status Sentinel::parse_primary(const Reply& rep, Endpoint* primary) {
  if (rep.type != ReplyType::kArray || rep.count != 2 ||
      rep.elements[0].type != ReplyType::kString || rep.elements[1].type != ReplyType::kString ||
      rep.elements[0].len > kMaxHostLen) {
    set_error(error_, "sentinel knows no primary named '%s'", name_);
    return ErrorCode::kNotConnected;
  }
  char url[kMaxHostLen + 32];
  std::snprintf(url, sizeof url, "redis://[%s]:%s", rep.elements[0].str, rep.elements[1].str);
  Endpoint addr;
  // Brackets are only for IPv6; retry without them for names and IPv4.
  if (!std::strchr(rep.elements[0].str, ':')) {
    std::snprintf(url, sizeof url, "redis://%s:%s", rep.elements[0].str, rep.elements[1].str);
  }
  if (!parse_url(url, &addr).ok()) {
    set_error(error_, "sentinel sent a bad address");
    return ErrorCode::kProtocol;
  }
  *primary = creds_;
  std::memcpy(primary->host, addr.host, sizeof addr.host);
  primary->port = addr.port;
  return Status();
}

Status Sentinel::check_role(Deadline deadline) {
  const Deadline d = deadline.min(Deadline::after(*clock_, options_.command_timeout));
  const Bytes role[1] = {Bytes::from_cstr("ROLE")};
  return role_verdict(primary_.command(role, d));
}

Status Sentinel::role_verdict(Result<const Reply*> r) {
  // A reply too big for the fixed arena cannot be read, so the node is not
  // confirmed (fail closed): a primary with more than 3 replicas, but also
  // a sentinel or anything else that answers at length.
  if (r.status().code() == ErrorCode::kBufferTooSmall) {
    set_error(error_, "%s:%u: ROLE reply too large to verify a primary (over 3 replicas?)",
              primary_.endpoint().host, primary_.endpoint().port);
    return ErrorCode::kNotConnected;
  }
  if (!r.ok()) return note(primary_, r.status());
  const Reply& rep = *r.value();
  if (rep.type != ReplyType::kArray || rep.count == 0 ||
      rep.elements[0].type != ReplyType::kString ||
      !rep.elements[0].bytes().equals(Bytes::from_cstr("master"))) {
    set_error(error_, "%s:%u is not a primary (failover in progress?)", primary_.endpoint().host,
              primary_.endpoint().port);
    return ErrorCode::kNotConnected;
  }
  return Status();
}

Status Sentinel::resolve(Deadline deadline) {
  if (!initialized_) return detail::not_initialized("sentinel", error_);
  abandon_lookup();  // a blocking lookup replaces one the steps started
  Status last = ErrorCode::kNotConnected;
  for (size_t i = 0; i < sentinel_count_; ++i) {
    if (deadline.expired(*clock_)) return ErrorCode::kTimeout;
    const size_t idx = (preferred_ + i) % sentinel_count_;
    Endpoint ep;
    last = ask(idx, deadline, &ep);
    if (!last.ok()) continue;
    const Endpoint& cur = primary_.endpoint();
    const bool same = cur.port == ep.port && std::strcmp(cur.host, ep.host) == 0;
    // An open connection was checked with ROLE when it was opened.
    if (!same || !primary_.is_connected()) {
      last = primary_.init(ep, options_);
      if (!last.ok()) return note(primary_, last);
      last = check_role(deadline);
      if (!last.ok()) {
        primary_.close();  // not verified: check again next time
        continue;
      }
    }
    found(idx);
    return Status();
  }
  return last;
}

void Sentinel::found(size_t index) {
  const Endpoint& ep = primary_.endpoint();
  preferred_ = index;
  stale_ = false;
  resolved_at_ = clock_->now();
  ++stats_.resolves;
  if (verified_port_ != 0 &&
      (verified_port_ != ep.port || std::strcmp(verified_host_, ep.host) != 0)) {
    ++stats_.primary_changes;
  }
  verified_port_ = ep.port;
  std::memcpy(verified_host_, ep.host, sizeof verified_host_);
}

Status Sentinel::check_key(Bytes key) {
  (void)key;  // one primary holds every key
  return Status();
}

Connection& Sentinel::connection_for(Bytes key) {
  (void)key;
  return primary_;
}

// The routed steps every lease's request takes (Sentinel::route_for()
// and the rest), driven to the end.
Result<const Reply*> Sentinel::eval(const ScriptCall& call, Deadline deadline) {
  if (!initialized_) return detail::not_initialized("sentinel", error_);
  return detail::call_routed(*this, call.keys.empty() ? Bytes() : call.keys[0], call, deadline);
}

Result<const Reply*> Sentinel::command(Bytes key, Span<const Bytes> args, Deadline deadline) {
  if (!initialized_) return detail::not_initialized("sentinel", error_);
  return detail::call_routed(*this, key, detail::plain_command(args), deadline);
}

detail::WriteConfirm Sentinel::confirmer() {
  return detail::confirm_over(sentinel_options_, stats_, confirmed_, wait_sent_, error_);
}

// Every confirmation ends here: an unknown outcome (timeout, I/O error)
// makes the next request look the primary up first.
Result<const Reply*> Sentinel::settle(const Result<const Reply*>& c) {
  if (detail::outcome_unknown(c.status().code())) stale_ = true;
  return c;
}

Result<const Reply*> Sentinel::start_confirm(Connection& node, const Reply* reply,
                                             Deadline deadline) {
  return settle(confirmer().start(node, reply, deadline));
}

Result<const Reply*> Sentinel::end_confirm(Connection& node, const Result<const Reply*>& wait) {
  return settle(confirmer().end(node, wait));
}

}  // namespace edgelock
