// LeaseCore: a routed request (Sentinel, Cluster): sent to the node the
// back end names, or paused while it looks one up, and sent on after a
// redirect, a TRYAGAIN or a lost node. Reached only through
// LeaseCore::kRouter, which a back end that routes hands out: built with
// the sentinel or cluster component, and linked only with one.
#include "edgelock/connection.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/lease_core.h"

namespace edgelock {
namespace detail {

// The routed request (turn_call_) to the node the back end names now, or
// a pause (resending_ with no node) while it is still looking that up.
Status LeaseCore::start_route() {
  conn_ = nullptr;
  Connection* node = backend_->route_for(key());
  if (node) return start_routed(node, false);
  const RouteNext next = backend_->route_pending(key());
  if (next.node) return start_routed(next.node, next.asking);
  if (next.pause <= Nanos::zero()) {
    return started(next.status.ok() ? Status(ErrorCode::kNotConnected) : next.status);
  }
  if (deadline_.expired(clock())) return started(ErrorCode::kTimeout);
  resending_ = true;
  resend_at_ = Deadline::at(clock().now() + next.pause).min(deadline_);
  return ErrorCode::kInProgress;
}

const LeaseRouter LeaseCore::kRouter = {&LeaseCore::start_route, &LeaseCore::start_route_pipelined,
                                        &LeaseCore::start_route_command, &LeaseCore::reroute,
                                        &LeaseCore::resend_due};

// A routed plain command. Its words are not kept (written whole at once):
// a redirect ends it, after teaching the back end the slot's owner. While
// the back end looks the node up again (a recheck due, a lost node), it
// goes to the node of the request before: a SCRIPT LOAD must reach the
// node that lost the script, and a BLPOP there at worst fails and backs
// off.
Status LeaseCore::start_route_command(Span<const Bytes> args, Deadline deadline) {
  plain_ = true;
  Connection* node = backend_->route_for(key());
  if (node) conn_ = node;
  if (!conn_) {
    const RouteNext next = backend_->route_pending(key());
    conn_ = next.node;
    const Status why = next.pause > Nanos::zero() ? Status(ErrorCode::kNotConnected) : next.status;
    if (!conn_) return started(why.ok() ? Status(ErrorCode::kNotConnected) : why);
  }
  ConnectionIo cio = io(*conn_);
  if (!cio.turn_of(this, false)) {
    return started(cio.refuse_busy("another request is in flight on this node"));
  }
  return started(cio.start_command(args, deadline));
}

// The routed request (turn_call_) to `node`, after ASKING with `asking`.
Status LeaseCore::start_routed(Connection* node, bool asking) {
  const Bytes asking_word[1] = {Bytes::from_cstr("ASKING")};
  if (!node) return started(ErrorCode::kInvalidArgument);
  conn_ = node;
  asked_ = asking;
  ConnectionIo cio = io(*node);
  if (!cio.turn_of(this, false)) return wait_node(node);
  pipelined_ = asking;
  // ASKING covers the next command only: a NOSCRIPT fallback would lose it.
  if (asking && cio.script_loaded(turn_call_.script)) {
    return started(cio.start_command_then_eval(asking_word, turn_call_, deadline_));
  }
  if (asking)
    return started(cio.start_command_then_eval_by_body(asking_word, turn_call_, deadline_));
  return started(cio.start_eval(turn_call_, deadline_));
}

// `node` carries another handle's request (handles on one Sentinel or
// Cluster share its node connections): look again every kTurnPoll until
// it is free, and give up, nothing sent, at the request's deadline. A
// neighbour's request holds it one round trip: waiters there poll, never
// BLPOP (LeaseCore::shared()). conn_ and asked_ say where it goes then.
Status LeaseCore::wait_node(Connection* node) {
  if (deadline_.expired(clock())) {
    return started(io(*node).refuse_busy(
        "another handle's request held the node past this request's deadline"));
  }
  resending_ = true;
  resend_at_ = Deadline::after(clock(), kTurnPoll).min(deadline_);
  return ErrorCode::kInProgress;
}

// `first` and the routed request (turn_call_) in one write to the node the
// back end names now; with none named, the request alone as start_route()
// sends it (`first` only waited: nothing is lost by dropping it).
Status LeaseCore::start_route_pipelined(Span<const Bytes> first) {
  conn_ = nullptr;
  Connection* node = backend_->route_for(key());
  if (!node) return start_route();
  conn_ = node;
  asked_ = false;
  ConnectionIo cio = io(*node);
  if (!cio.turn_of(this, false)) return wait_node(node);  // `first` only waited
  pipelined_ = true;
  return started(cio.start_command_then_eval(first, turn_call_, deadline_));
}

// A routed request's error: follow its redirect, pause (TRYAGAIN), or end.
Result<const Reply*> LeaseCore::reroute(Status s) {
  const RouteNext next = backend_->on_routed_error(*conn_, key(), s);
  if (plain_) return s;
  if (!next.node && next.pause <= Nanos::zero()) return next.status;
  if (deadline_.expired(clock())) return Status(ErrorCode::kTimeout);
  if (!next.node) {
    resending_ = true;
    resend_at_ = Deadline::at(clock().now() + next.pause).min(deadline_);
    if (next.again) conn_ = nullptr;  // routed afresh when the pause is over
    return static_cast<const Reply*>(nullptr);
  }
  if (++redirects_ > kMaxRedirects) return Status(ErrorCode::kServerError);
  start_routed(next.node, next.asking).ignore();  // kInProgress; a failure is in result_
  return resend();
}

// The outcome so far of a routed request just (re)started.
Result<const Reply*> LeaseCore::resend() {
  if (!done_) return static_cast<const Reply*>(nullptr);
  done_ = false;
  return result_;
}

// A routed request's pause (TRYAGAIN): over, it goes to the same node again
// (after ASKING again if it was asked there), or, with no node (a lookup
// under way, or the node gone), wherever the back end routes it now.
Result<const Reply*> LeaseCore::resend_due() {
  if (!resend_at_.expired(clock())) return static_cast<const Reply*>(nullptr);
  resending_ = false;
  if (cancelling_ || (deadline_.expired(clock()) && !(conn_ && io(*conn_).busy()))) {
    phase_ = OpPhase::kIdle;
    return Status(ErrorCode::kTimeout);
  }
  // kInProgress (a failure is in result_), or a pause again.
  (conn_ ? start_routed(conn_, asked_) : start_route()).ignore();
  if (resending_) return static_cast<const Reply*>(nullptr);
  const Result<const Reply*> r = resend();
  if (!r.ok()) phase_ = OpPhase::kIdle;
  return r;
}

}  // namespace detail
}  // namespace edgelock
