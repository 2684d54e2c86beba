// LeaseCore: the operation in flight of a single-server primitive (one
// request or one pause at a time), the wait around its attempts, and the
// blocking driver that turns the start/step machine into a blocking call.
#include "connection/machine.h"
#include "edgelock/connection.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/lease_core.h"

namespace edgelock {
namespace detail {

namespace {

// A second guard behind every wait's deadline: the shortest pause is 1 ms
// (rate limiters) or retry_min, so this is over 16 minutes of waiting.
constexpr uint32_t kMaxWaitAttempts = 1000000;
// Steps cancel() runs: an operation ends within a few (the request, a
// hand-back, the end).
constexpr int kMaxCancelSteps = 8;

// A deadline that has passed on every clock: "step now".
constexpr Deadline kNow = Deadline::at(TimePoint());

}  // namespace

Status LeaseCore::begin_op(uint8_t op, bool nonblocking) {
  if (op_ != 0 || op == 0) return ErrorCode::kInvalidArgument;
  if (nonblocking && !steps()) return ErrorCode::kInvalidArgument;
  op_ = op;
  phase_ = OpPhase::kIdle;
  done_ = false;
  waiting_ = false;
  nonblocking_ = nonblocking;
  return Status();
}

Status LeaseCore::step(Again again, OnReply on_reply, void* self) {
  if (op_ == 0) return ErrorCode::kInvalidArgument;
  if (phase_ == OpPhase::kPause) {
    if (!pause_over()) return ErrorCode::kInProgress;
    return again(self, attempt_deadline());
  }
  const Result<const Reply*> r = reply();
  if (r.ok() && !r.value()) return ErrorCode::kInProgress;
  return on_reply(self, r);
}

Status LeaseCore::end_op(Status s) {
  leave_queue();
  op_ = 0;
  phase_ = OpPhase::kIdle;
  done_ = false;
  waiting_ = false;
  router_ = nullptr;
  plain_ = false;
  resending_ = false;
  confirming_ = false;
  return s;
}

void LeaseCore::complete(Result<const Reply*> r) {
  done_ = true;
  result_ = r;
}

Status LeaseCore::started(Status s) {
  if (!s.ok()) {
    complete(s);
    return ErrorCode::kInProgress;
  }
  // Written now: the request is on its way before the caller's loop waits.
  const Result<const Reply*> r = io(*conn_).advance();
  if (!r.ok()) complete(r);
  return ErrorCode::kInProgress;
}

// A new request's state; false while cancel() runs (its outcome,
// kTimeout, is then in result_: nothing new starts).
bool LeaseCore::begin_request(Deadline deadline) {
  phase_ = OpPhase::kRequest;
  done_ = false;
  pipelined_ = false;
  first_ = Status();
  deadline_ = deadline;
  router_ = nullptr;
  plain_ = false;
  resending_ = false;
  confirming_ = false;
  if (cancelling_) complete(ErrorCode::kTimeout);
  return !cancelling_;
}

Status LeaseCore::send(const ScriptCall& call, Deadline deadline) {
  if (!begin_request(deadline)) return ErrorCode::kInProgress;
  Connection* c = backend_->direct();
  const LeaseRouter* routes = c ? nullptr : backend_->router();
  if (routes) {
    turn_call_ = call;
    redirects_ = 0;
    router_ = routes;
    return (this->*routes->start)();
  }
  if (!c) {
    // A back end that cannot route: blocking only.
    complete(call.script ? backend_->eval(call, deadline)
                         : backend_->command(key(), call.args, deadline));
    return ErrorCode::kInProgress;
  }
  conn_ = c;
  ConnectionIo cio = io(*c);
  if (cio.turn_of(this, nonblocking_)) return started(cio.start_eval(call, deadline));
  const Status s = cio.queue_turn(this);
  if (!s.ok()) return started(s);
  queued_ = true;
  turn_call_ = call;
  return ErrorCode::kInProgress;
}

// A blocking call takes the connection as soon as it is free: it holds
// the caller's loop anyway, and the handles queued first cannot step.
Status LeaseCore::take_turn(ConnectionIo& io) {
  if (io.turn_of(this, nonblocking_)) {
    leave_queue();
    return io.start_eval(turn_call_, deadline_);
  }
  if (!deadline_.expired(clock())) return ErrorCode::kInProgress;
  leave_queue();
  return io.refuse_busy("another handle's request held it past this request's deadline");
}

void LeaseCore::leave_queue() {
  if (!queued_) return;
  queued_ = false;
  io(*conn_).leave_queue(this);
}

Status LeaseCore::send_command(Span<const Bytes> args, Deadline deadline) {
  if (!begin_request(deadline)) return ErrorCode::kInProgress;
  Connection* c = backend_->direct();
  const LeaseRouter* routes = c ? nullptr : backend_->router();
  if (routes) {
    router_ = routes;
    return (this->*routes->start_command)(args, deadline);
  }
  if (!c) {
    complete(backend_->command(key(), args, deadline));
    return ErrorCode::kInProgress;
  }
  conn_ = c;
  return started(io(*c).start_command(args, deadline));
}

Status LeaseCore::send_pipelined(Span<const Bytes> first, const ScriptCall& call,
                                 Deadline deadline) {
  if (!begin_request(deadline)) return ErrorCode::kInProgress;
  Connection* c = backend_->direct();
  const LeaseRouter* routes = c ? nullptr : backend_->router();
  if (!c && !routes) {
    complete(ErrorCode::kInvalidArgument);
    return ErrorCode::kInProgress;
  }
  if (routes) {
    turn_call_ = call;
    redirects_ = 0;
    router_ = routes;
    return (this->*routes->start_pipelined)(first);
  }
  conn_ = c;
  pipelined_ = true;
  return started(io(*c).start_command_then_eval(first, call, deadline));
}

// The outcome kept in result_.
Result<const Reply*> LeaseCore::outcome() {
  done_ = false;
  // A routed request that could not start (a node refused the connect):
  // the back end hears of it too, so a lost node is replaced for the slot
  // (or the request waits for a new primary, and goes there).
  if (router_ && conn_ && !cancelling_ && !result_.ok()) {
    const Result<const Reply*> next = (this->*router_->reroute)(result_.status());
    if (next.ok() && !next.value()) return next;  // on its way again
    phase_ = OpPhase::kIdle;
    return next;
  }
  phase_ = OpPhase::kIdle;
  return result_;
}

Result<const Reply*> LeaseCore::reply() {
  if (done_) return outcome();
  if (resending_) return (this->*router_->resend_due)();
  ConnectionIo io = detail::io(*conn_);
  if (queued_) {
    const Status s = take_turn(io);
    if (s.code() == ErrorCode::kInProgress) return static_cast<const Reply*>(nullptr);
    if (!s.ok()) {
      phase_ = OpPhase::kIdle;
      return s;
    }
  }
  // Up to three replies in one step: a pipelined first command's, the
  // call's, and the WAIT that confirms a routed write.
  for (int i = 0; i < 3; ++i) {
    Result<const Reply*> r = io.advance();
    if (r.ok() && !r.value()) break;
    if (pipelined_ && io.busy()) {
      // The first command's reply (or its error reply): the call's is next.
      first_ = r.ok() ? Status() : r.status();
      pipelined_ = false;
      continue;
    }
    if (confirming_) {
      confirming_ = false;
      r = backend_->end_confirm(*conn_, r);
    } else if (router_ && !r.ok()) {
      const Result<const Reply*> next = (this->*router_->reroute)(r.status());
      if (next.ok() && !next.value()) return next;  // on its way again
      phase_ = OpPhase::kIdle;
      return next;
    } else if (router_ && !plain_ && turn_call_.writes_lease) {
      // A grant counts once the back end's replicas confirm it (WAIT).
      r = backend_->start_confirm(*conn_, r.value(), deadline_);
      confirming_ = r.ok() && !r.value();
      if (confirming_) continue;
    }
    phase_ = OpPhase::kIdle;
    return r;
  }
  if (!deadline_.expired(clock())) return static_cast<const Reply*>(nullptr);
  phase_ = OpPhase::kIdle;
  return io.abandon();
}

Status LeaseCore::pause(Nanos d) {
  if (cancelling_) return end_op(ErrorCode::kTimeout);
  phase_ = OpPhase::kPause;
  deadline_ = Deadline::at(clock().now() + (d > Nanos::zero() ? d : Nanos::zero()));
  return ErrorCode::kInProgress;
}

bool LeaseCore::pause_over() {
  if (phase_ == OpPhase::kPause && !deadline_.expired(clock())) return false;
  phase_ = OpPhase::kIdle;
  return true;
}

size_t LeaseCore::wait_fds(pollfd* out, size_t cap) const {
  if (phase_ != OpPhase::kRequest || done_ || queued_ || resending_ || !out || cap == 0) return 0;
  Connection* c = conn_;
  if (!c) return 0;
  const ConnectionIo io = detail::io(*c);
  if (!io.busy() || io.fd() < 0) return 0;
  out[0] = pollfd{io.fd(), io.wait_events(), 0};
  return 1;
}

Deadline LeaseCore::next_deadline() const {
  switch (phase_) {
    case OpPhase::kPause: return deadline_;
    case OpPhase::kRequest: {
      if (done_) return kNow;
      if (queued_) return deadline_.min(Deadline::after(clock(), kTurnPoll));
      if (resending_) return resend_at_;
      Connection* c = conn_;
      // Decrypted TLS bytes wait where a poll() cannot see them.
      if (c && io(*c).has_pending_input()) return kNow;
      // A connect phase may give up before the request's deadline.
      return c ? deadline_.min(io(*c).step_deadline()) : deadline_;
    }
    default: return op_ != 0 ? kNow : Deadline::never();
  }
}

void LeaseCore::await() {
  if (phase_ == OpPhase::kPause) {
    clock().sleep_for(deadline_.remaining(clock()));
    return;
  }
  if (phase_ != OpPhase::kRequest || done_) return;
  if (queued_) {
    const Nanos left = deadline_.remaining(clock());
    clock().sleep_for(left < kTurnPoll ? left : kTurnPoll);
    return;
  }
  if (resending_) {
    clock().sleep_for(resend_at_.remaining(clock()));
    return;
  }
  const Status s = io(*conn_).await(deadline_);
  // A failed read or wait closed the connection: that is the outcome.
  if (!s.ok() && s.code() != ErrorCode::kTimeout) complete(s);
}

Status LeaseCore::run(Status s, OpStep step, void* self) {
  struct Driven {
    LeaseCore* core;
    OpStep step;
    void* self;
  } d{this, step, self};
  const Machine m{
      &d, [](void* p) { return static_cast<Driven*>(p)->step(static_cast<Driven*>(p)->self); },
      [](void* p) { static_cast<Driven*>(p)->core->await(); },
      [](void* p) {
        Driven& x = *static_cast<Driven*>(p);
        x.core->cancel(x.step, x.self);
      }};
  return run_machine(s, m);
}

void LeaseCore::cancel(OpStep step, void* self) {
  if (op_ == 0) return;
  if (phase_ == OpPhase::kPause) {
    end_op(ErrorCode::kTimeout).ignore();  // nothing in flight to account for
    return;
  }
  cancelling_ = true;
  if (phase_ == OpPhase::kRequest && !done_ && queued_) {
    leave_queue();  // never sent; the request in flight is another handle's
    complete(ErrorCode::kTimeout);
  } else if (phase_ == OpPhase::kRequest && !done_ && resending_) {
    resending_ = false;
    complete(ErrorCode::kTimeout);
  } else if (phase_ == OpPhase::kRequest && !done_) {
    ConnectionIo io = detail::io(*conn_);
    complete(io.busy() ? io.abandon() : Status(ErrorCode::kTimeout));
  }
  for (int i = 0; i < kMaxCancelSteps && op_ != 0; ++i) step(self).ignore();
  if (op_ != 0) end_op(ErrorCode::kTimeout).ignore();
  cancelling_ = false;
}

void LeaseCore::begin_wait(Nanos wait, RetryOn on) {
  waiting_ = true;
  retry_on_ = on;
  attempts_ = 0;
  wait_until_ = Deadline::after(clock(), wait);
  // The last attempt may start just before the wait ends and still needs
  // its round trip.
  attempts_until_ =
      wait_until_.is_never() ? wait_until_ : Deadline::at(wait_until_.when() + command_timeout());
  backoff_.reset();
}

bool LeaseCore::wait_on(Status s, Nanos* left) {
  if (!waiting_ || cancelling_ || s.ok() || !wants_retry(s, retry_on_)) return false;
  if (++attempts_ >= kMaxWaitAttempts) return false;
  *left = wait_until_.remaining(clock());
  return *left > Nanos::zero();
}

Deadline LeaseCore::attempt_deadline() const { return io_deadline().min(attempts_until_); }

}  // namespace detail
}  // namespace edgelock
