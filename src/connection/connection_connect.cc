// Connection: set-up, name resolution, and the connect as steps of the
// same machine that moves requests (connection.cc).
//
//   kDisconnected / kBackingOff --start_connect--> kConnecting
//   kConnecting --transport open (socket connect, TLS handshake)--> kHandshaking
//   kHandshaking --AUTH and SELECT written in one go, both +OK--> kIdle
//       (a request started while disconnected then begins: kSending)
//   any connect failure, the connect deadline included --> kBackingOff
//
// No step waits: advance() takes the next one when the caller's poll() says
// the socket is ready for wait_events(), or when step_deadline() passed.
// AUTH and SELECT go out together, one round trip, but the request waits
// for their replies: a request pipelined behind a refused AUTH would run
// as the default user, behind a refused SELECT in database 0.
#include <cstdio>

#include "base/error_text.h"
#include "edgelock/connection.h"
#include "resp/encoder.h"
#include "transport/transport.h"

namespace edgelock {

namespace {

Status encode_words(ByteBuilder& out, const Bytes* words, size_t n) {
  return resp::encode_command(out, resp::Command{words, n, nullptr});
}

}  // namespace

Status Connection::before_init() {
  set_error(error_, "connection used before init()");
  return ErrorCode::kInvalidArgument;
}

Status Connection::init(const char* url, const ConnectionOptions& options) {
  Endpoint ep;
  const char* why = nullptr;
  const Status s = parse_url(url, &ep, &why);
  if (!s.ok()) {
    set_error(error_, "bad URL: %s", why ? why : "invalid");
    return s;
  }
  return init(ep, options);
}

Status Connection::init(const Endpoint& endpoint, const ConnectionOptions& options) {
  close();
  if (endpoint.scheme == Scheme::kTls && !options.transport && !detail::tls_available()) {
    set_error(error_, "rediss:// needs TLS, and this build has none");
    return ErrorCode::kTlsUnavailable;
  }
  if (options.connect_timeout <= Nanos::zero() || options.command_timeout <= Nanos::zero() ||
      options.reconnect_min <= Nanos::zero() || options.reconnect_max < options.reconnect_min) {
    set_error(error_, "timeouts must be positive");
    return ErrorCode::kInvalidArgument;
  }
  endpoint_ = endpoint;
  options_ = options;
  clock_ = options.clock ? options.clock : &default_clock();
  transport_ = options.transport ? options.transport : &socket_;
  failed_connects_ = 0;
  next_connect_at_ = TimePoint();
  state_ = State::kDisconnected;
  error_[0] = '\0';
  addresses_ = ResolvedHost();
  // A literal is its own address; a name waits for resolve() (or the first
  // connect): no I/O here.
  if (!options.transport) detail::transport_resolve_numeric(endpoint_, &addresses_);
  return Status();
}

// A host name neither resolve() nor a connect has looked up since init()
// (a failed lookup sets lookup_error: it is not tried again by a connect).
bool Connection::name_unresolved() const {
  return !options_.transport && addresses_.count == 0 && addresses_.lookup_error == 0 &&
         endpoint_.scheme != Scheme::kUnix && endpoint_.host[0] != '\0';
}

Status Connection::resolve() {
  if (state_ == State::kUnconfigured) return before_init();
  if (options_.transport) return Status();  // it gets the endpoint as parsed
  bool looked_up = false;
  const Status s = detail::transport_resolve(endpoint_, &addresses_, &looked_up, error_);
  if (looked_up) ++stats_.lookups;
  return s;
}

// --- The connect.

Status Connection::connect(Deadline deadline) {
  if (state_ == State::kUnconfigured) return before_init();
  EDGELOCK_TRY(start_connect(deadline, 0));
  if (!busy()) return Status();
  return wait(deadline).status();
}

// Drops what was there and starts opening the stream. `queued` replies
// belong to a request already encoded in tx_: it begins once connected.
Status Connection::start_connect(Deadline deadline, uint8_t queued) {
  // Blocks on DNS, once: resolve() at set-up keeps this out of the loop.
  // A failure leaves its reason in addresses_ for the open to report.
  if (name_unresolved()) resolve().ignore();
  drop();
  state_ = State::kConnecting;
  queued_replies_ = queued;
  // The connect budget caps the caller's deadline: a dead server must not
  // hold an operation longer than connect_timeout.
  connect_deadline_ = deadline.min(Deadline::after(*clock_, options_.connect_timeout));
  Status s = transport_->start_open(endpoint_, addresses_, options_.tls, connect_deadline_, *clock_,
                                    error_);
  // A first look at once: on loopback or a LAN the peer has often answered
  // within the connect call (a refusal then fails the start itself).
  if (s.ok() && transport_->opening()) s = transport_->open_step(*clock_, error_);
  if (!s.ok()) return fail_connect(s);
  if (transport_->opening()) return Status();
  return start_handshake().status();
}

Result<const Reply*> Connection::advance_connect() {
  if (state_ == State::kHandshaking) return step_handshake();
  const Status s = transport_->open_step(*clock_, error_);
  if (!s.ok()) return fail_connect(s);
  if (transport_->opening()) return static_cast<const Reply*>(nullptr);
  return start_handshake();
}

// Encodes AUTH and SELECT (those the URL asks for) into the empty receive
// buffer and writes what it can now. Nothing is read into that buffer
// before they are written whole.
Result<const Reply*> Connection::start_handshake() {
  state_ = State::kHandshaking;
  hs_sent_ = 0;
  hs_due_ = 0;
  rx_.clear();
  size_t avail = 0;
  uint8_t* buf = rx_.space(&avail);
  hs_ = buf;
  ByteBuilder out(buf, avail < kHandshakeSize ? avail : kHandshakeSize);
  Bytes words[3];
  Status s;
  if (endpoint_.has_password) {
    size_t n = 0;
    words[n++] = Bytes::from_cstr("AUTH");
    if (endpoint_.user[0] != '\0') words[n++] = Bytes::from_cstr(endpoint_.user);
    words[n++] = Bytes::from_cstr(endpoint_.password);
    s = encode_words(out, words, n);
    ++hs_due_;
  }
  char db[12];
  if (s.ok() && endpoint_.db != 0) {
    words[0] = Bytes::from_cstr("SELECT");
    words[1] = Bytes(db, static_cast<size_t>(std::snprintf(db, sizeof db, "%d", endpoint_.db)));
    s = encode_words(out, words, 2);
    ++hs_due_;
  }
  if (!s.ok()) {
    set_error(error_, "AUTH/SELECT do not fit the %zu-byte buffer", kHandshakeSize);
    return fail_connect(s);
  }
  hs_len_ = static_cast<uint16_t>(out.size());
  if (hs_due_ == 0) return connected();
  return step_handshake();
}

Result<const Reply*> Connection::step_handshake() {
  if (hs_sent_ < hs_len_) {
    // Written whole, the replies are a round trip away: no read now.
    const Result<size_t> w = transport_->write_some(hs_ + hs_sent_, hs_len_ - hs_sent_, error_);
    if (!w.ok()) return fail_connect(w.status());
    hs_sent_ = static_cast<uint16_t>(hs_sent_ + w.value());
  } else {
    const Result<const Reply*> r = read_handshake();
    if (!r.ok() || state_ != State::kHandshaking) return r;
  }
  if (!connect_deadline_.expired(*clock_)) return static_cast<const Reply*>(nullptr);
  set_error(error_, "no reply to AUTH/SELECT within the connect deadline");
  return fail_connect(ErrorCode::kTimeout);
}

// Reads what is there of the AUTH/SELECT replies; the last one connects.
Result<const Reply*> Connection::read_handshake() {
  while (hs_due_ > 0) {
    const char* why = nullptr;
    const Result<const Reply*> r = pull_reply(&why);
    if (!r.ok()) {
      if (why) set_error(error_, "reply to AUTH/SELECT: %s", why);
      return fail_connect(r.status());
    }
    if (!r.value()) return r;
    EDGELOCK_TRY(check_handshake_reply(*r.value()));
    --hs_due_;
  }
  if (rx_.unread() > 0) {
    set_error(error_, "server sent more than one reply");
    return fail_connect(ErrorCode::kProtocol);
  }
  return connected();
}

// An error reply keeps its own code (kAuthFailed, kNoAuth, kServerError..).
Status Connection::check_handshake_reply(const Reply& reply) {
  if (reply.type == ReplyType::kStatus) return Status();
  if (reply.type == ReplyType::kError) {
    set_error(error_, "%.*s", static_cast<int>(reply.len), reply.str);
    return fail_connect(classify_error_reply(reply.str, reply.len));
  }
  set_error(error_, "unexpected reply type: AUTH/SELECT wants +OK");
  return fail_connect(ErrorCode::kProtocol);
}

// Connected: a request waiting for the connect begins (advance() writes
// it at once).
Result<const Reply*> Connection::connected() {
  state_ = State::kIdle;
  failed_connects_ = 0;
  connect_deadline_ = Deadline::never();
  if (stats_.connects++ > 0) note_event(EventKind::kReconnect, Status(), Bytes(), Nanos::zero());
  const uint8_t queued = queued_replies_;
  queued_replies_ = 0;
  if (queued > 0) begin(queued);
  return static_cast<const Reply*>(nullptr);
}

void Connection::back_off() {
  ++stats_.connect_failures;
  Nanos backoff = options_.reconnect_min;
  for (uint32_t i = 0; i < failed_connects_ && backoff < options_.reconnect_max; ++i) backoff *= 2;
  next_connect_at_ =
      clock_->now() + (backoff < options_.reconnect_max ? backoff : options_.reconnect_max);
  ++failed_connects_;
  state_ = State::kBackingOff;
}

Status Connection::fail_connect(Status s) {
  drop();
  back_off();
  return s;
}

// The deadline passed during the connect: one last step lets the phase
// that ran out say so in its own words (socket, TLS, AUTH/SELECT).
Status Connection::abandon_connect() {
  const Result<const Reply*> r = advance_connect();
  if (!r.ok()) return r.status();
  if (connecting()) {
    set_error(error_, "connect not done within the deadline");
    return fail_connect(ErrorCode::kTimeout);
  }
  set_error(error_, "no reply within the deadline");
  return leave(ErrorCode::kTimeout);
}

Deadline Connection::step_deadline() const {
  if (state_ == State::kConnecting) return connect_deadline_.min(transport_->open_deadline());
  if (state_ == State::kHandshaking) return connect_deadline_;
  return Deadline::never();
}

}  // namespace edgelock
