// Sentinel routing for the non-blocking face: the known primary, or a
// lookup through the sentinels advanced by the caller's steps (each
// exchange started on its Connection and moved with non-blocking I/O).
#include <cstring>

#include "backends/routed_call.h"
#include "backends/sentinel_rules.h"
#include "base/error_text.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/reply.h"
#include "edgelock/sentinel.h"

namespace edgelock {

namespace {

// How often a request waiting for the lookup polls it: the lookup's
// exchanges give the caller's loop no fd of their own.
constexpr Nanos kLookupPoll = Millis(2);
// "At the next step": the pause after which a request is routed afresh.
constexpr Nanos kNextStep = Nanos(1);
// Moves of the lookup one step may make: each either starts I/O (and
// returns) or passes to the next sentinel.
constexpr size_t kMaxMoves = 2 * kMaxSentinels + 2;

// Moves the lookup's exchange on `conn` (a question to a sentinel, or ROLE
// to the primary): its reply, kInProgress while it is under way, or its
// error; one that passed `until` is given up (a stopped node: the lookup
// asks the next).
Result<const Reply*> exchange(Connection& conn, Deadline until) {
  detail::ConnectionIo io = detail::io(conn);
  Result<const Reply*> r = io.advance();
  if (!r.ok() || r.value()) return r;
  if (!until.expired(conn.clock())) return ErrorCode::kInProgress;
  return io.abandon();
}

}  // namespace

const detail::LeaseRouter* Sentinel::router() const {
  return initialized_ && sentinel_count_ > 0 ? &detail::LeaseCore::kRouter : nullptr;
}

Connection* Sentinel::route_for(Bytes key) {
  static_cast<void>(key);  // one primary holds every key
  if (!router()) return nullptr;
  const Nanos recheck = sentinel_options_.recheck_interval;
  if (recheck > Nanos::zero() && clock_->now() - resolved_at_ >= recheck) stale_ = true;
  // Closed by a timeout or an I/O error (and no request reconnecting it):
  // the primary may be gone, so it is looked up and verified again.
  if (!primary_.is_connected() && !detail::io(primary_).busy()) stale_ = true;
  return stale_ || lookup_ != Lookup::kIdle ? nullptr : &primary_;
}

RouteNext Sentinel::route_pending(Bytes key) {
  if (!router()) return detail::unrouted("sentinel", error_);
  RouteNext next;
  if (!stale_ && lookup_ == Lookup::kIdle && route_for(key)) {
    next.node = &primary_;
    return next;
  }
  const Status s = lookup_step();
  if (s.ok()) {
    next.node = &primary_;
  } else if (s.code() == ErrorCode::kInProgress) {
    const Nanos left = lookup_until_.remaining(*clock_);
    next.pause = lookup_ == Lookup::kPausing && left > Nanos::zero() && left < kLookupPoll
                     ? left
                     : kLookupPoll;
  } else {
    next.status = s;
  }
  return next;
}

RouteNext Sentinel::on_routed_error(Connection& node, Bytes key, Status s) {
  static_cast<void>(key);
  RouteNext next;
  next.status = note(node, s);
  if (&node != &primary_) return next;
  const ErrorCode code = s.code();
  if (code == ErrorCode::kReadOnly) ++stats_.readonly;
  if (detail::retry_after_resolve(code)) {
    // Surely not run on a primary: send it again to the one found next.
    primary_.close();  // the lookup verifies whatever it finds
    stale_ = true;
    next.pause = kNextStep;
    next.again = true;
    return next;
  }
  if (detail::outcome_unknown(code)) stale_ = true;
  return next;
}

// kInProgress while an exchange or a pause is under way; ok once primary_
// is verified; else the error that ends the lookup.
Status Sentinel::lookup_step() {
  if (lookup_ == Lookup::kIdle) {
    lookup_index_ = 0;
    lookup_last_ = ErrorCode::kNotConnected;
    lookup_ = Lookup::kNext;
  }
  for (size_t i = 0; i < kMaxMoves; ++i) {
    Status s = ErrorCode::kInProgress;
    switch (lookup_) {
      case Lookup::kPausing:
        if (!lookup_until_.expired(*clock_)) return s;
        lookup_index_ = 0;
        lookup_ = Lookup::kNext;
        continue;
      case Lookup::kNext: s = lookup_ask(); break;
      case Lookup::kAsking: s = lookup_asked(); break;
      case Lookup::kChecking: s = lookup_checked(); break;
      case Lookup::kIdle: return ErrorCode::kInvalidArgument;
    }
    if (s.code() == ErrorCode::kInProgress) return s;
    if (s.ok()) {
      lookup_ = Lookup::kIdle;
      found((preferred_ + lookup_index_) % sentinel_count_);
      return s;
    }
    const Status f = lookup_failed(s);
    if (!f.ok()) return f;
  }
  return ErrorCode::kInProgress;
}

// The sentinel asked gave no verified primary (`s`): ask the next (ok),
// pause before another round (kInProgress), or end with `s`.
Status Sentinel::lookup_failed(Status s) {
  lookup_last_ = s;
  if (++lookup_index_ < sentinel_count_) {
    lookup_ = Lookup::kNext;
    return Status();
  }
  if (!detail::transient(s.code())) {
    lookup_ = Lookup::kIdle;  // e.g. a wrong sentinel password
    return s;
  }
  // No primary right now (failover in progress): ask again after a pause.
  lookup_ = Lookup::kPausing;
  lookup_until_ = Deadline::after(*clock_, sentinel_options_.retry_pause);
  return ErrorCode::kInProgress;
}

Status Sentinel::lookup_ask() {
  const size_t index = (preferred_ + lookup_index_) % sentinel_count_;
  const Status aimed = aim_probe(index);
  if (!aimed.ok()) return note(probe_, aimed);
  const Bytes args[3] = {Bytes::from_cstr("SENTINEL"), Bytes::from_cstr("get-master-addr-by-name"),
                         Bytes::from_cstr(name_)};
  lookup_until_ = Deadline::after(*clock_, options_.command_timeout);
  const Status s = detail::io(probe_).start_command(args, lookup_until_);
  if (!s.ok()) return note(probe_, s);
  lookup_ = Lookup::kAsking;
  return lookup_asked();  // written at once
}

// The sentinel's answer: the primary known (and connected) as is, or a
// new one to verify with ROLE.
Status Sentinel::lookup_asked() {
  const Result<const Reply*> r = exchange(probe_, lookup_until_);
  if (r.status().code() == ErrorCode::kInProgress) return r.status();
  if (!r.ok()) return note(probe_, r.status());
  Endpoint ep;
  EDGELOCK_TRY(parse_primary(*r.value(), &ep));
  const Endpoint& cur = primary_.endpoint();
  const bool same = cur.port == ep.port && std::strcmp(cur.host, ep.host) == 0;
  // An open connection was checked with ROLE when it was opened.
  if (same && primary_.is_connected()) return Status();
  detail::ConnectionIo pio = detail::io(primary_);
  if (pio.busy()) {
    // A request started before the lookup (a BLPOP, or one on a frozen
    // primary) is still out there: ask again after a pause, since it ends
    // by its deadline at the latest.
    lookup_ = Lookup::kPausing;
    lookup_until_ = Deadline::after(*clock_, sentinel_options_.retry_pause);
    return ErrorCode::kInProgress;
  }
  EDGELOCK_TRY(primary_.init(ep, options_));
  const Bytes role[1] = {Bytes::from_cstr("ROLE")};
  lookup_until_ = Deadline::after(*clock_, options_.command_timeout);
  const Status s = pio.start_command(role, lookup_until_);
  if (!s.ok()) {
    primary_.close();
    return note(primary_, s);
  }
  lookup_ = Lookup::kChecking;
  return lookup_checked();  // written at once
}

Status Sentinel::lookup_checked() {
  const Result<const Reply*> r = exchange(primary_, lookup_until_);
  if (r.status().code() == ErrorCode::kInProgress) return r.status();
  const Status s = role_verdict(r);
  if (!s.ok()) primary_.close();  // not verified: check again next time
  return s;
}

// A blocking lookup takes over: the steps' exchange in flight is dropped
// (its connection closed, since its reply may still come).
void Sentinel::abandon_lookup() {
  if (lookup_ == Lookup::kAsking && detail::io(probe_).busy()) {
    detail::io(probe_).abandon().ignore();
  }
  if (lookup_ == Lookup::kChecking && detail::io(primary_).busy()) {
    detail::io(primary_).abandon().ignore();
  }
  lookup_ = Lookup::kIdle;
}

}  // namespace edgelock
