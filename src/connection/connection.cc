// Connection: one state machine over a byte transport.
//
//   kUnconfigured --init--> kDisconnected --connect/start--> kConnecting
//   kConnecting --open--> kHandshaking --AUTH, SELECT +OK--> kIdle (or, for a
//       request started while disconnected, straight on to kSending)
//   kConnecting, kHandshaking --any failure--> kBackingOff (connects wait
//       until next_connect_at_, then --connect--> as from kDisconnected)
//   kIdle --start--> kSending --written--> kReceiving --last reply due--> kIdle
//   kReceiving --NOSCRIPT to our EVALSHA--> kSending (the EVAL, once)
//   kReceiving --pipeline_eval--> kSending (one more reply due)
//
// A reply, error replies included, moves the machine forward (on_reply).
// Every other failure leaves through leave(): the stream is kept only when
// it is idle and the failure never touched it (a request refused while
// encoding); otherwise it is closed and the next command reconnects. So no
// failure can leave a request "in flight" for good. Calls refused up front
// (a request already in flight, a null argument) change nothing. The
// connect's steps are in connection_connect.cc.
#include "edgelock/connection.h"

#include <cstdio>
#include <cstring>

#include "base/error_text.h"
#include "connection/machine.h"
#include "edgelock/detail/connection_io.h"
#include "resp/encoder.h"

namespace edgelock {

namespace {

// EVALSHA sha numkeys key... arg...: at most 3 + keys + args words.
constexpr size_t kMaxEvalWords = 16;

// Connection::wait() as a machine for the one driver (machine.h).
struct Waiter {
  detail::ConnectionIo io;
  Clock& clock;
  Deadline deadline;
  Status awaited;  // the last wait's failure ends the request
  Result<const Reply*> out{nullptr};
};

Status end_with(Waiter& w, Result<const Reply*> r) {
  w.out = r;
  return r.ok() ? Status() : r.status();
}

Status wait_step(void* self) {
  Waiter& w = *static_cast<Waiter*>(self);
  if (w.awaited.code() == ErrorCode::kTimeout) return end_with(w, w.io.abandon());
  if (!w.awaited.ok()) return end_with(w, w.awaited);
  const Result<const Reply*> r = w.io.advance();
  // Not busy after a step that returned no reply: a bare connect is done.
  if (!r.ok() || r.value() || !w.io.busy()) return end_with(w, r);
  if (w.deadline.expired(w.clock)) return end_with(w, w.io.abandon());
  return ErrorCode::kInProgress;
}

void wait_await(void* self) {
  Waiter& w = *static_cast<Waiter*>(self);
  w.awaited = w.io.await(w.deadline);
}

void wait_cancel(void* self) {
  Waiter& w = *static_cast<Waiter*>(self);
  end_with(w, w.io.abandon()).ignore();
}

}  // namespace

Connection::~Connection() { transport_->close(); }

// --- Set-up (init(), resolve()) and the connect: connection_connect.cc.

// Closes the stream; a set-up connection becomes kDisconnected (or stays
// kBackingOff), an unconfigured one stays so.
void Connection::drop() {
  transport_->close();
  rx_.clear();
  replies_due_ = 0;
  head_sha_ = nullptr;
  loaded_n_ = 0;  // the next stream may reach a restarted server
  queued_replies_ = 0;
  connect_deadline_ = Deadline::never();
  if (state_ >= State::kConnecting) state_ = State::kDisconnected;
}

void Connection::close() { drop(); }

Status Connection::leave(Status s) {
  if (connecting()) return fail_connect(s);
  const bool untouched = state_ == State::kIdle && (s.code() == ErrorCode::kBufferTooSmall ||
                                                    s.code() == ErrorCode::kInvalidArgument);
  if (untouched) return s;
  if (state_ >= State::kIdle) ++stats_.io_errors;
  drop();
  return s;
}

// Ready for a request, before encoding it: an idle stream with input
// waiting (or closed by the peer) would answer with someone else's reply,
// so it is dropped and the request connects anew.
Status Connection::prepare() {
  if (state_ == State::kIdle && (rx_.unread() > 0 || transport_->has_stale_input())) {
    set_error(error_, "idle connection had unexpected input or was closed; reconnecting");
    leave(ErrorCode::kProtocol).ignore();
  }
  if (state_ == State::kUnconfigured) return before_init();
  // Keep the last connect error's text; say why we did not try.
  if (state_ == State::kBackingOff && clock_->now() < next_connect_at_) {
    return ErrorCode::kNotConnected;
  }
  return Status();
}

// The request encoded in tx_ begins now, or once the connect it starts is
// done (advance() takes both on).
Status Connection::launch(uint8_t replies, Deadline deadline) {
  if (state_ == State::kIdle) {
    begin(replies);
    return Status();
  }
  return start_connect(deadline, replies);
}

// --- Encoding into the fixed command buffer.

Status Connection::encode(Span<const Bytes> args, size_t offset, const Bytes* suffixes) {
  ByteBuilder out(tx_ + offset, sizeof tx_ - offset);
  const resp::Command command{args.data(), args.size(), suffixes};
  const Status s = resp::encode_command(out, command);
  if (!s.ok()) {
    set_error(error_, "command of %zu bytes does not fit the %zu-byte buffer",
              resp::encoded_length(command), sizeof tx_ - offset);
    return s;
  }
  tx_len_ = offset + out.size();
  return Status();
}

Status Connection::encode_eval(bool by_sha, size_t offset) {
  if (by_body_next_) by_sha = false;
  by_body_next_ = false;
  eval_by_sha_ = by_sha && eval_.script;
  if (!eval_.script) return encode(eval_.args, offset);  // a plain command (ScriptCall)
  if (by_sha && offset == 0 && replies_due_ == 0) head_sha_ = eval_.script;
  const size_t nkeys = eval_.keys.size() + eval_.companions.size();
  if (nkeys + eval_.args.size() + 3 > kMaxEvalWords ||
      (eval_.keys.empty() && !eval_.companions.empty())) {
    set_error(error_, "EVAL with more than %zu keys and arguments, or companions without a key",
              kMaxEvalWords - 3);
    return ErrorCode::kInvalidArgument;
  }
  Bytes argv[kMaxEvalWords];
  Bytes suffixes[kMaxEvalWords];  // a companion's, else empty
  char numkeys[8];
  const int n = std::snprintf(numkeys, sizeof numkeys, "%zu", nkeys);
  const Script& script = *eval_.script;
  size_t c = 0;
  argv[c++] = Bytes::from_cstr(by_sha ? "EVALSHA" : "EVAL");
  argv[c++] = by_sha ? Bytes(script.sha1, 40) : Bytes(script.body, script.len);
  argv[c++] = Bytes(numkeys, static_cast<size_t>(n));
  for (const Bytes& key : eval_.keys) argv[c++] = key;
  for (const Bytes& suffix : eval_.companions) {
    suffixes[c] = suffix;
    argv[c++] = eval_.keys[0];
  }
  for (const Bytes& arg : eval_.args) argv[c++] = arg;
  return encode(Span<const Bytes>(argv, c), offset, suffixes);
}

void Connection::begin(uint8_t replies) {
  rx_.release();  // the previous request's replies end here
  redirect_ = resp::Redirect();
  tx_sent_ = 0;
  replies_due_ = replies;
  stats_.commands += replies;
  may_block_ = true;
  state_ = State::kSending;
}

// --- Starting requests.

Status Connection::start_command(Span<const Bytes> args, Deadline deadline) {
  if (busy()) return refuse_busy("a request is already in flight on this connection");
  EDGELOCK_TRY(prepare());
  eval_ = ScriptCall();
  const Status s = encode(args, 0);
  if (!s.ok()) return leave(s);
  return launch(1, deadline);
}

Status Connection::start_eval(const ScriptCall& call, Deadline deadline, bool by_sha) {
  if (busy()) return refuse_busy("a request is already in flight on this connection");
  EDGELOCK_TRY(prepare());
  eval_ = call;
  const Status s = encode_eval(by_sha, 0);
  if (!s.ok()) return leave(s);
  return launch(1, deadline);
}

// --- Moving bytes.

Result<size_t> Connection::read(bool may_wait) {
  size_t avail = 0;
  uint8_t* dst = rx_.space(&avail);
  if (avail == 0) {
    set_error(error_, "reply exceeds the %zu-byte receive buffer", kRxBufferSize);
    return ErrorCode::kBufferTooSmall;
  }
  const Result<size_t> n = transport_->read_some(dst, avail, may_wait, error_);
  if (n.ok()) rx_.commit(n.value());
  return n;
}

Result<const Reply*> Connection::send_some() {
  const Result<size_t> w = transport_->write_some(tx_ + tx_sent_, tx_len_ - tx_sent_, error_);
  if (!w.ok()) return leave(w.status());
  tx_sent_ += w.value();
  // Written whole: the reply is a round trip away, so no read now (a
  // recv() would almost always return EAGAIN: 3 syscalls per command
  // instead of ~4; see docs/benchmarks.md).
  if (tx_sent_ == tx_len_) state_ = State::kReceiving;
  return static_cast<const Reply*>(nullptr);
}

// The next whole reply in the receive buffer, reading what the transport
// has (never waiting) while none is: nullptr when none is whole yet. A
// parse error sets *why to what was wrong (the caller words it); a read
// error leaves *why null, its text already in error_.
Result<const Reply*> Connection::pull_reply(const char** why) {
  *why = nullptr;
  for (int i = 0; i < 4; ++i) {
    const Reply* reply = nullptr;
    const char* parse_why = "";
    const Status s = rx_.next(&reply, &parse_why);
    if (!s.ok()) {
      *why = parse_why;
      return s;
    }
    if (reply) return reply;
    const Result<size_t> n = read(false);
    if (!n.ok()) return n.status();
    if (n.value() == 0) break;
  }
  return static_cast<const Reply*>(nullptr);
}

Result<const Reply*> Connection::receive() {
  const char* why = nullptr;
  const Result<const Reply*> r = pull_reply(&why);
  if (r.ok()) return r.value() ? on_reply(r.value()) : r;
  if (why && r.status().code() == ErrorCode::kProtocol) {
    // The code's name ("protocol error") comes with the code; the text
    // says what was wrong. A first byte that starts no RESP reply at all
    // is most often another service on the port (HTTP, SSH).
    const bool alien = std::strcmp(why, "unknown type byte") == 0;
    set_error(error_, "%s%s", why, alien ? " (not a RESP reply: is this a Redis port?)" : "");
  } else if (why) {
    set_error(error_, "reply larger than the fixed reply capacities: %s", why);
  }
  return leave(r.status());
}

Result<const Reply*> Connection::on_reply(const Reply* reply) {
  // The last reply due, and more bytes behind it: unsolicited, a sign we
  // may be reading someone else's answer.
  if (replies_due_ == 1 && rx_.unread() > 0) {
    set_error(error_, "server sent more than one reply");
    return leave(ErrorCode::kProtocol);
  }
  note_loaded(reply);
  if (--replies_due_ == 0) state_ = State::kIdle;
  if (reply->type != ReplyType::kError) {
    // The text describes the last failure; once a request has succeeded
    // it would describe an error that no longer holds.
    if (state_ == State::kIdle) error_[0] = '\0';
    return reply;
  }
  const ErrorCode code = classify_error_reply(reply->str, reply->len);
  if (code == ErrorCode::kNoScript && state_ == State::kIdle && eval_by_sha_ && eval_.script) {
    // The server lost its script cache: send the body once, which reloads
    // it (an EVAL answered with NOSCRIPT is an error, not a loop). Built-in
    // scripts always fit (eval_capacity.h); a caller's may not, and then
    // the call fails with the connection idle.
    const Status s = encode_eval(false, 0);
    if (!s.ok()) return leave(s);
    begin(1);
    return send_some();  // now: a non-blocking caller may not look again soon
  }
  if (code == ErrorCode::kNoScript) by_body_next_ = true;
  if (code == ErrorCode::kMoved || code == ErrorCode::kAsk) {
    redirect_ = resp::decode_redirect(reply->str, reply->len);
  }
  set_error(error_, "%.*s", static_cast<int>(reply->len), reply->str);
  return code;
}

Result<const Reply*> Connection::advance() {
  if (state_ == State::kSending) return send_some();
  if (state_ == State::kReceiving) return receive();
  if (!connecting()) return ErrorCode::kInvalidArgument;
  const Result<const Reply*> r = advance_connect();
  // Connected just now: the request waiting for it is written at once (a
  // non-blocking caller may not look again soon).
  if (!r.ok() || state_ != State::kSending) return r;
  return send_some();
}

Result<const Reply*> Connection::advance_pipeline() {
  const bool was_sending = state_ == State::kSending;
  Result<const Reply*> r = advance();
  // A pipelined request written whole just now: an earlier reply may
  // already wait unread (a lone request's reply is a round trip away).
  if (was_sending && replies_due_ > 1 && r.ok() && !r.value() && state_ == State::kReceiving) {
    r = advance();
  }
  return r;
}

short Connection::wait_events() const {
  // Opening: what the socket connect or the TLS handshake waits for.
  if (state_ == State::kConnecting) return transport_->extra_events();
  const bool write =
      state_ == State::kSending || (state_ == State::kHandshaking && hs_sent_ < hs_len_);
  return static_cast<short>((write ? kWantWrite : kWantRead) | transport_->extra_events());
}

Status Connection::abandon() {
  if (connecting()) return abandon_connect();
  set_error(error_, "no reply within the deadline");
  return leave(ErrorCode::kTimeout);
}

Status Connection::reject_reply(const char* what) {
  set_error(error_, "unexpected reply type: %s", what);
  return leave(ErrorCode::kProtocol);
}

// --- Blocking calls: the engine driven to the next reply (or, for
// connect(), to the end of the connect) within one deadline: one wait.

// Blocks until the request in flight (or the connect before it) can move
// or `deadline` passes.
// Waiting for a reply in the read itself saves the wait's syscall: only
// with a slice's worth of deadline left, and once a slice passes empty the
// rest of the request's waits are the transport's (an injected clock may
// not move). Such a read keeps what it got in the receive buffer for the
// next advance().
Status Connection::await(Deadline deadline) {
  if (!busy()) return Status();
  // Decrypted TLS bytes wait in mbedTLS, where a wait cannot see them.
  if (transport_->has_pending_input()) return Status();
  if (deadline.expired(*clock_)) return ErrorCode::kTimeout;
  if (may_block_ && state_ == State::kReceiving &&
      deadline.remaining(*clock_) >= kTransportWaitSlice + kTransportWaitMargin) {
    const Result<size_t> n = read(true);
    if (!n.ok()) return leave(n.status());
    may_block_ = n.value() > 0;
    return Status();
  }
  // A connect phase may give up before `deadline`: then the next advance()
  // says so.
  TransportWait w{transport_, wait_events(), 0};
  const Result<size_t> ready =
      transport_->wait(&w, 1, deadline.min(step_deadline()), *clock_, error_);
  if (!ready.ok()) return leave(ready.status());
  if (ready.value() > 0 || (connecting() && !deadline.expired(*clock_))) return Status();
  return ErrorCode::kTimeout;
}

Result<const Reply*> Connection::wait(Deadline deadline) {
  may_block_ = true;
  Waiter w{detail::io(*this), *clock_, deadline, Status(), nullptr};
  const Status s = detail::run_machine(wait_step(&w), {&w, &wait_step, &wait_await, &wait_cancel});
  if (!s.ok() && w.out.ok()) return s;  // cancelled after 2^20 turns
  return w.out;
}

Result<const Reply*> Connection::command(Span<const Bytes> args, Deadline deadline) {
  EDGELOCK_TRY(start_command(args, deadline));
  return wait(deadline);
}

Result<const Reply*> Connection::eval(const ScriptCall& call, Deadline deadline) {
  EDGELOCK_TRY(start_eval(call, deadline));
  return wait(deadline);
}

// The single lock queues its acquire behind the BLPOP that waits for the
// release signal (docs/benchmarks.md, "Handoff").
Status Connection::start_command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                           Deadline deadline, bool by_sha) {
  if (busy()) return refuse_busy("a request is already in flight on this connection");
  EDGELOCK_TRY(prepare());
  eval_ = call;
  Status s = encode(args, 0);
  if (s.ok()) s = encode_eval(by_sha, tx_len_);
  if (!s.ok()) return leave(s);
  return launch(2, deadline);
}

Result<const Reply*> Connection::command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                                   Deadline deadline, Status* first) {
  if (!first) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(start_command_then_eval(args, call, deadline));
  const Result<const Reply*> r = wait(deadline);
  // A transport failure or a timeout closed the connection: the eval's
  // fate is unknown, like any lost reply. An error reply to the command
  // leaves the eval's reply still to come.
  if (!r.ok() && !busy()) return r.status();
  *first = r.ok() ? Status() : r.status();
  return wait(deadline);
}

void Connection::note_event(EventKind kind, Status status, Bytes key, Nanos latency) {
  metrics_.record(kind, status, latency);
  if (hook_) {
    Event e;
    e.kind = kind;
    e.status = status;
    e.key = key;
    e.latency = latency;
    hook_(e, hook_context_);
  }
}

}  // namespace edgelock
