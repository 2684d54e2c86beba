#pragma once
// Internal: the non-blocking engine of a Connection, for the library's own
// fan-out (QuorumLock), the single lock's pipelined wait, the primitives'
// reply checks and the routers. Not part of the public face: applications
// use Connection's blocking calls.
//
//   detail::ConnectionIo io = detail::io(conn);
//   io.start_eval(call, deadline);            // encodes, starts a connect if needed
//   while (io.busy()) { wait on io.fd()/io.wait_events() until at most
//                       io.step_deadline(); io.advance(); }
//
// Arguments of a started request must stay valid until its reply is in.

#include <cstdint>

#include "edgelock/connection.h"

namespace edgelock {
namespace detail {

class ConnectionIo {
 public:
  explicit ConnectionIo(Connection& conn) : c_(&conn) {}

  /// Most replies a connection may owe at once (see pipeline_eval()).
  static constexpr uint8_t kMaxPipelined = 4;

  /// Encodes and starts sending (EVALSHA; advance() falls back to EVAL on
  /// NOSCRIPT). On a closed connection it starts the connect instead (ok,
  /// busy(), connecting()): advance() takes the connect's steps, bounded
  /// by `deadline` and connect_timeout, and then writes the request. A
  /// connect that fails at once (refused unix socket, no address) fails
  /// here.
  /// Errors: as Connection::connect(), kNotConnected, kBufferTooSmall,
  /// kConnectionBusy (a request in flight), kInvalidArgument (not set up,
  /// no script, more
  /// than 13 keys (with companions) and arguments, companions without a
  /// key).
  Status start_eval(const ScriptCall& call, Deadline deadline) {
    return c_->start_eval(call, deadline);
  }
  /// start_eval() by body (EVAL): the request can never come back NOSCRIPT,
  /// so another may be queued behind it (pipeline_eval()) and it still runs.
  Status start_eval_by_body(const ScriptCall& call, Deadline deadline) {
    return c_->start_eval(call, deadline, false);
  }
  /// As start_eval() for a plain command. Errors: as connect(),
  /// kNotConnected, kBufferTooSmall, kConnectionBusy (a request in flight).
  Status start_command(Span<const Bytes> args, Deadline deadline) {
    return c_->start_command(args, deadline);
  }
  /// Does what I/O it can without blocking, a connect's steps included.
  /// Returns the next reply when complete, nullptr while pending; busy()
  /// stays true while more replies are due. Errors: as
  /// Connection::command() (kTimeout only from a connect phase whose
  /// deadline passed); kInvalidArgument (nothing in flight).
  Result<const Reply*> advance() { return c_->advance(); }

  /// Queues an EVAL of call.script (by body, so it never needs the NOSCRIPT
  /// fallback) behind the request in flight, on one connection: the server
  /// runs it right after that request, even if that request's reply is
  /// never read. A quorum lock queues its release behind an acquire left
  /// unanswered by a frozen server. Read the replies, oldest first, with
  /// advance_pipeline(). No allocation. Errors: kInvalidArgument (nothing
  /// in flight, the request in flight not yet written whole,
  /// kMaxPipelined replies already due, no script, more than 13 keys (with
  /// companions) and arguments, companions without a key),
  /// kBufferTooSmall (the EVAL does not fit the command buffer). On error
  /// nothing was queued.
  Status pipeline_eval(const ScriptCall& call) { return c_->pipeline_eval(call); }
  /// advance() that returns each reply of a pipeline in turn: busy() stays
  /// true until the last is in. An error reply to an earlier request is
  /// returned as its error with the connection still busy; a transport
  /// failure closes the connection (busy() false: the rest is lost).
  Result<const Reply*> advance_pipeline() { return c_->advance_pipeline(); }

  /// Starts `args` and EVALSHA call.script in one write (a pipeline). Redis
  /// runs the eval as soon as the command is done, even one that blocks
  /// (BLPOP): a waiter gets its answer one round trip after the wake-up
  /// instead of two. advance() returns the command's reply (or its error
  /// reply) with busy() still true, then the eval's. Errors: as
  /// start_eval().
  Status start_command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                 Deadline deadline) {
    return c_->start_command_then_eval(args, call, deadline);
  }
  /// start_command_then_eval() with the eval by body (EVAL): it can never
  /// come back NOSCRIPT, so it runs right after the command (ASKING covers
  /// the next command only). Errors: as start_eval().
  Status start_command_then_eval_by_body(Span<const Bytes> args, const ScriptCall& call,
                                         Deadline deadline) {
    return c_->start_command_then_eval(args, call, deadline, false);
  }
  /// start_command_then_eval() and waits for both replies; returns the
  /// eval's. `*first` gets the command's outcome (ok, or its error reply's
  /// code); its reply is not kept. Errors: as Connection::eval() (for the
  /// connection or the eval's reply); kInvalidArgument also for a null
  /// `first`.
  Result<const Reply*> command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                         Deadline deadline, Status* first) {
    return c_->command_then_eval(args, call, deadline, first);
  }
  /// Blocks until the request in flight can move (bytes to read or room to
  /// write) or `deadline` passes; may read the reply into the receive
  /// buffer for the next advance() (one syscall instead of a wait and a
  /// read). For blocking drivers only. Ok when there is nothing in flight.
  /// Errors: kTimeout (the deadline passed; the request is still in
  /// flight: abandon() it), and a read or wait failure (kIo,
  /// kConnectionClosed, kTls, kBufferTooSmall: the connection is closed,
  /// the request lost).
  Status await(Deadline deadline) { return c_->await(deadline); }
  /// Waits for the reply of the request in flight (a blocking call's loop).
  Result<const Reply*> wait(Deadline deadline) { return c_->wait(deadline); }

  /// Gives up on the request in flight (deadline passed): the connection is
  /// closed since its reply may still arrive. Returns kTimeout; during a
  /// connect, that connect's own error if its last step fails otherwise
  /// (the connect then counts as failed: reconnects back off).
  Status abandon() { return c_->abandon(); }
  /// For callers that got a well-formed reply of the wrong type or value:
  /// the server is not speaking our protocol (or the reply is not ours), so
  /// the connection is closed and the next command reconnects. Keeps
  /// `what` in last_error(). Always returns kProtocol.
  Status reject_reply(const char* what) { return c_->reject_reply(what); }
  /// Counts an operation in the connection's metrics and calls its event
  /// hook (the primitives report through this).
  void note_event(EventKind kind, Status status, Bytes key, Nanos latency) {
    c_->note_event(kind, status, key, latency);
  }

  /// `owner` may start a request now: none in flight and, with `in_order`,
  /// no other handle queued before it.
  bool turn_of(const void* owner, bool in_order) const { return c_->turn_of(owner, in_order); }
  /// Queues `owner` for its turn (once; a queued owner stays where it is).
  /// Errors: kConnectionBusy (the queue is full; last_error() says so).
  Status queue_turn(const void* owner) { return c_->queue_turn(owner); }
  /// Takes `owner` out of the queue (nothing if it is not in it).
  void leave_queue(const void* owner) { c_->leave_queue(owner); }
  /// Keeps `why` in last_error(); returns kConnectionBusy.
  Status refuse_busy(const char* why) { return c_->refuse_busy(why); }

  /// This stream has seen `script` run (a reply it made): an EVALSHA of it
  /// cannot come back NOSCRIPT short of a SCRIPT FLUSH. Until then a request
  /// another may be queued behind goes by body: a NOSCRIPT then could not
  /// be re-sent in order, and the request would never run.
  bool script_loaded(const Script* script) const { return c_->script_loaded(script); }
  /// The MOVED or ASK the last request got, decoded (valid false
  /// otherwise); its host views the receive buffer until the next request.
  const resp::Redirect& redirect() const { return c_->redirect_; }
  /// Replies still to read for what was sent.
  uint8_t replies_due() const { return c_->replies_due_; }
  /// A request is in flight (being written, or replies due, or waiting for
  /// the connect it started).
  bool busy() const { return c_->busy(); }
  /// A connect is under way (socket, TLS handshake, AUTH/SELECT): a
  /// request started meanwhile has not been written yet.
  bool connecting() const { return c_->connecting(); }
  /// When the connect under way gives up a phase (never() otherwise): a
  /// caller's wait ends then even if the socket never becomes ready.
  Deadline step_deadline() const { return c_->step_deadline(); }
  /// The stream to wait on, and the events the request in flight waits for.
  Transport& transport() const { return *c_->transport_; }
  short wait_events() const { return c_->wait_events(); }
  /// True if received bytes wait where a wait cannot see them (TLS): call
  /// advance() again before waiting.
  bool has_pending_input() const { return c_->transport_->has_pending_input(); }
  /// The socket (-1 if none, or a transport without one).
  int fd() const { return c_->transport_->fd(); }

 private:
  Connection* c_;
};

/// The engine view of `conn`.
inline ConnectionIo io(Connection& conn) { return ConnectionIo(conn); }

}  // namespace detail
}  // namespace edgelock
