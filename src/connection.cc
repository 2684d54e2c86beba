// Connection setup, connect/handshake and the blocking command calls.
#include "error_text.h"
#include "edgelock/connection.h"

#include <cstdio>
#include <cstring>

#include "transport/transport.h"

namespace edgelock {

namespace {

bool has_prefix(const char* text, size_t len, const char* prefix) {
  const size_t n = std::strlen(prefix);
  return len >= n && std::memcmp(text, prefix, n) == 0;
}

}  // namespace

ErrorCode classify_error_reply(const char* text, size_t len) {
  if (has_prefix(text, len, "WRONGPASS") || has_prefix(text, len, "ERR invalid password") ||
      has_prefix(text, len, "ERR AUTH") || has_prefix(text, len, "ERR Client sent AUTH") ||
      has_prefix(text, len, "NOPERM")) {
    return ErrorCode::kAuthFailed;
  }
  if (has_prefix(text, len, "NOAUTH")) return ErrorCode::kNoAuth;
  if (has_prefix(text, len, "READONLY")) return ErrorCode::kReadOnly;
  if (has_prefix(text, len, "OOM")) return ErrorCode::kOutOfMemory;
  if (has_prefix(text, len, "BUSY")) return ErrorCode::kServerBusy;
  if (has_prefix(text, len, "LOADING")) return ErrorCode::kLoading;
  return ErrorCode::kServerError;
}

Connection::~Connection() { detail::transport_close(transport_); }

Status Connection::setup(const char* url, const ConnectionOptions& options) {
  Endpoint ep;
  const char* why = nullptr;
  const Status s = parse_url(url, &ep, &why);
  if (!s.ok()) {
    set_error(error_, "bad URL: %s", why ? why : "invalid");
    return s;
  }
  return setup(ep, options);
}

Status Connection::setup(const Endpoint& endpoint, const ConnectionOptions& options) {
  close();
  if (endpoint.scheme == Scheme::kTls && !detail::tls_available()) {
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
  failed_connects_ = 0;
  next_connect_at_ = TimePoint();
  is_setup_ = true;
  error_[0] = '\0';
  addresses_ = ResolvedHost();
  // A name that does not resolve now still makes a valid setup (DNS may
  // come up later): connects fail fast until resolve() succeeds.
  resolve().ignore();
  return Status();
}

Status Connection::resolve() {
  if (!is_setup_) {
    set_error(error_, "connection used before setup()");
    return ErrorCode::kInvalidArgument;
  }
  bool looked_up = false;
  const Status s = detail::transport_resolve(endpoint_, &addresses_, &looked_up, error_);
  if (looked_up) ++stats_.lookups;
  return s;
}

void Connection::close() {
  detail::transport_close(transport_);
  phase_ = Phase::kIdle;
}

Status Connection::fail(Status s) {
  ++stats_.io_errors;
  close();
  return s;
}

Status Connection::connect(Deadline deadline) {
  if (!is_setup_) {
    set_error(error_, "connection used before setup()");
    return ErrorCode::kInvalidArgument;
  }
  close();
  // The connect budget caps the caller's deadline: a dead server must not
  // hold an operation longer than connect_timeout.
  const Deadline d = deadline.min(Deadline::after(*clock_, options_.connect_timeout));
  Status s = detail::transport_open(transport_, endpoint_, addresses_, options_.tls, d, *clock_,
                                    error_);
  if (s.ok()) s = handshake(d);
  if (!s.ok()) {
    close();
    ++stats_.connect_failures;
    Nanos backoff = options_.reconnect_min;
    for (uint32_t i = 0; i < failed_connects_ && backoff < options_.reconnect_max; ++i) backoff *= 2;
    next_connect_at_ = clock_->now() + (backoff < options_.reconnect_max ? backoff : options_.reconnect_max);
    ++failed_connects_;
    return s;
  }
  failed_connects_ = 0;
  if (stats_.connects++ > 0) note_event(EventKind::kReconnect, Status(), Bytes(), Nanos::zero());
  return Status();
}

Status Connection::handshake(Deadline deadline) {
  if (endpoint_.has_password) {
    Bytes auth[3];
    size_t n = 0;
    auth[n++] = Bytes::from_cstr("AUTH");
    if (endpoint_.user[0] != '\0') auth[n++] = Bytes::from_cstr(endpoint_.user);
    auth[n++] = Bytes::from_cstr(endpoint_.password);
    EDGELOCK_TRY(encode(Span<const Bytes>(auth, n)));
    EDGELOCK_TRY(begin());
    const Result<const Reply*> r = wait(deadline);
    if (!r.ok()) return r.status();
    if (r.value()->type != ReplyType::kStatus) return reject_reply("AUTH wants +OK");
  }
  if (endpoint_.db != 0) {
    char db[12];
    const int n = std::snprintf(db, sizeof db, "%d", endpoint_.db);
    const Bytes select[2] = {Bytes::from_cstr("SELECT"), Bytes(db, static_cast<size_t>(n))};
    EDGELOCK_TRY(encode(select));
    EDGELOCK_TRY(begin());
    const Result<const Reply*> r = wait(deadline);
    if (!r.ok()) return r.status();
    if (r.value()->type != ReplyType::kStatus) return reject_reply("SELECT wants +OK");
  }
  return Status();
}

Status Connection::ensure_connected(Deadline deadline) {
  if (is_connected()) return Status();
  if (!is_setup_) {
    set_error(error_, "connection used before setup()");
    return ErrorCode::kInvalidArgument;
  }
  if (failed_connects_ > 0 && clock_->now() < next_connect_at_) {
    // Keep the last connect error's text; say why we did not try.
    return ErrorCode::kNotConnected;
  }
  return connect(deadline);
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

Result<const Reply*> Connection::command(Span<const Bytes> args, Deadline deadline) {
  EDGELOCK_TRY(start_command(args, deadline));
  return wait(deadline);
}

Result<const Reply*> Connection::eval(const ScriptCall& call, Deadline deadline) {
  EDGELOCK_TRY(start_eval(call, deadline));
  return wait(deadline);
}

}  // namespace edgelock
