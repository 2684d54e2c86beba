#pragma once
/// @file connection.h
/// One connection to one Redis server: fixed buffers, one deadline per
/// operation, sticky error text, reconnect with bounded backoff.
///
/// Lifecycle (Mbed TLS style): construct, setup() (parses; looks a host
/// name up once), then use; the first command connects. Connect/reconnect
/// allocate (hiredis's context, freed before connect returns; the TLS
/// session); commands after that allocate nothing. A reply returned by a
/// command stays valid until the next command on this connection.
///
/// Name resolution: a host name is looked up in setup() (getaddrinfo,
/// which has no timeout of ours and allocates) and again only when you call
/// resolve() or setup(). Every connect and reconnect goes to the addresses
/// found then, within its deadline, and never calls the resolver, so a
/// reconnect during a renewal cannot block on DNS. TLS still verifies (and
/// sends as SNI) the host name from the URL. After the server moves to a
/// new address, call resolve().
///
/// Sockets are close-on-exec from their creation, on every connect and
/// reconnect: a child started with fork+exec never inherits one.

#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/transport_state.h"
#include "edgelock/endpoint.h"
#include "edgelock/metrics.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/script_call.h"
#include "edgelock/span.h"
#include "edgelock/status.h"
#include "edgelock/tls_options.h"

namespace edgelock {

struct ConnectionOptions {
  /// Budget for TCP connect + TLS handshake + AUTH/SELECT.
  Nanos connect_timeout = Millis(2000);
  /// Default per-command budget when the caller gives none.
  Nanos command_timeout = Millis(2000);
  /// Reconnect backoff after failed connects: doubles from min up to max.
  Nanos reconnect_min = Millis(20);
  Nanos reconnect_max = Millis(2000);
  TlsOptions tls;
  /// Time source; nullptr = default_clock() (CLOCK_BOOTTIME: counts time
  /// suspended, as the server's TTL does).
  Clock* clock = nullptr;
};

/// Counters kept by a connection (fixed size, no heap).
struct ConnectionStats {
  uint32_t connects = 0;         ///< Successful connects, first one included.
  uint32_t connect_failures = 0;
  uint32_t commands = 0;         ///< Commands sent (EVAL retries included).
  uint32_t io_errors = 0;        ///< Connections dropped by an error/timeout.
  uint32_t lookups = 0;          ///< Host name lookups (setup(), resolve()).
};

class Connection final : public Backend {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Parses `url`, keeps the options and resolves the host (resolve()).
  /// An IP literal or a unix socket needs no I/O and no allocation; a host
  /// name is looked up now (may block on DNS, allocates). A name that does
  /// not resolve still makes a valid setup (last_error() says why): connects
  /// then fail with kConnectFailed until resolve() succeeds.
  /// Errors: kInvalidArgument, kBufferTooSmall (bad URL; see last_error()),
  /// kTlsUnavailable (rediss:// in a build without TLS).
  Status setup(const char* url, const ConnectionOptions& options = {});
  /// As above with an already parsed endpoint.
  Status setup(const Endpoint& endpoint, const ConnectionOptions& options = {});

  /// Looks the host name up again (getaddrinfo: blocks on DNS with no
  /// timeout of ours, allocates); the next connect uses the new addresses,
  /// an open connection stays as it is. IP literals and unix sockets: no
  /// I/O. On failure the old addresses are kept.
  /// Errors: kConnectFailed (the name does not resolve; see last_error()),
  /// kInvalidArgument (not set up).
  Status resolve();
  /// The addresses connects try, in order (empty for unix sockets and
  /// before a lookup succeeded).
  const ResolvedHost& addresses() const { return addresses_; }

  /// Connects now: socket, TLS, AUTH, SELECT, all within `deadline` (and
  /// connect_timeout), to the addresses resolved at setup()/resolve(); it
  /// never looks a name up.
  /// Errors: kConnectFailed (refused, unreachable, or the host name never
  /// resolved), kTimeout, kTls, kTlsUntrusted, kTlsCertTime,
  /// kTlsHostMismatch, kTlsUnavailable, kAuthFailed,
  /// kNoAuth, kServerError, kIo, kConnectionClosed, kProtocol,
  /// kBufferTooSmall, kInvalidArgument (not set up).
  Status connect(Deadline deadline);
  Status connect() { return connect(Deadline::after(clock(), options_.connect_timeout)); }
  /// Closes the socket. The next command reconnects.
  void close();
  bool is_connected() const { return transport_.fd >= 0; }

  /// Sends a command and waits for its reply until `deadline`, connecting
  /// first if needed (also when the idle connection turned out to be closed
  /// or to hold unsolicited input). Error replies become errors (text in last_error()).
  /// The reply lives until the next command on this connection.
  /// Errors: everything connect() returns, kNotConnected (reconnect backing
  /// off), kTimeout, kIo, kConnectionClosed, kProtocol, kBufferTooSmall,
  /// kServerError, kAuthFailed, kNoAuth, kReadOnly, kOutOfMemory,
  /// kServerBusy, kLoading.
  Result<const Reply*> command(Span<const Bytes> args, Deadline deadline);
  /// Backend: as command(args, deadline); one server serves every key.
  Result<const Reply*> command(Bytes key, Span<const Bytes> args, Deadline deadline) override {
    (void)key;
    return command(args, deadline);
  }
  /// EVALSHA call.script, falling back to EVAL on NOSCRIPT (restart, SCRIPT
  /// FLUSH), all within `deadline`. call.writes_lease changes nothing (one
  /// server has no replicas to confirm). The library's own scripts always
  /// fit the command buffer as EVAL (checked at build time); a caller's
  /// script whose EVAL does not fit fails with kBufferTooSmall after the
  /// NOSCRIPT, and the connection stays usable. Errors: as command(),
  /// kInvalidArgument (no script, more than 13 keys and arguments).
  Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) override;

  /// Sends `args` and EVALSHA call.script in one write (a pipeline) and
  /// waits for both replies; returns the eval's. Redis runs the eval as
  /// soon as the command is done, even one that blocks (BLPOP): a waiter
  /// gets its answer one round trip after the wake-up instead of two.
  /// `*first` gets the command's outcome (ok, or its error reply's code);
  /// its reply is not kept. Errors: as eval() (for the connection or the
  /// eval's reply); kInvalidArgument also for a null `first` or a command
  /// already in flight.
  Result<const Reply*> command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                         Deadline deadline, Status* first);

  // --- Backend: one server, so every key is fine and served here.
  /// Always ok (no error).
  Status check_key(Bytes key) override {
    (void)key;
    return Status();
  }
  /// This connection.
  Connection& connection_for(Bytes key) override {
    (void)key;
    return *this;
  }
  /// This connection.
  Connection* direct() override { return this; }
  /// options().command_timeout.
  Nanos command_timeout() const override { return options_.command_timeout; }

  // --- Non-blocking use, for fanning out over many connections with one
  // poll(). Arguments must stay valid until the reply is complete.

  /// Encodes and starts sending (EVALSHA; advance() falls back to EVAL on
  /// NOSCRIPT). Connects first (bounded by `deadline`).
  /// Errors: as connect(), kNotConnected, kBufferTooSmall, kInvalidArgument
  /// (a command in flight, no script, more than 13 keys and arguments).
  Status start_eval(const ScriptCall& call, Deadline deadline);
  /// As start_eval() for a plain command. Errors: as connect(),
  /// kNotConnected, kBufferTooSmall, kInvalidArgument (a command in flight).
  Status start_command(Span<const Bytes> args, Deadline deadline);
  /// Does what I/O it can without blocking. Returns the reply when complete,
  /// nullptr while pending. Errors: as command() except kTimeout.
  Result<const Reply*> advance();
  /// For callers that got a well-formed reply of the wrong type or value:
  /// the server is not speaking our protocol (or the reply is not ours), so
  /// the connection is closed and the next command reconnects. Keeps
  /// `what` in last_error(). Always returns kProtocol.
  Status reject_reply(const char* what);

  /// Queues an EVAL of call.script (by body, so it never needs the NOSCRIPT
  /// fallback) behind the request in flight, in one connection: the server
  /// runs it right after that request, even if that request's reply is
  /// never read. A quorum lock queues its release behind an acquire left
  /// unanswered by a frozen server. Read the replies, oldest first, with
  /// advance_pipeline(). No allocation. Errors: kInvalidArgument (nothing
  /// in flight, the request in flight not yet written whole,
  /// kMaxPipelined replies already due, no script, more than 13 keys and
  /// arguments), kBufferTooSmall (the EVAL does not fit the command
  /// buffer). On error nothing was queued.
  Status pipeline_eval(const ScriptCall& call);
  /// advance() that returns each reply of a pipeline in turn: busy() stays
  /// true until the last is in. An error reply to an earlier request is
  /// returned as its error with the connection still busy; a transport
  /// failure closes the connection (busy() false: the rest is lost).
  Result<const Reply*> advance_pipeline();
  /// Most replies a connection may owe at once (see pipeline_eval()).
  static constexpr uint8_t kMaxPipelined = 4;

  /// Gives up on the command in flight (deadline passed): the connection is
  /// closed since its reply may still arrive. Returns kTimeout.
  Status abandon();
  bool busy() const { return phase_ != Phase::kIdle; }
  int fd() const { return transport_.fd; }
  /// poll() events the command in flight waits for.
  short poll_events() const;
  /// True if received bytes wait in a buffer poll() cannot see (TLS): call
  /// advance() again before polling.
  bool has_pending_input() const;

  /// The last error's text (fixed buffer, NUL-terminated, never null).
  const char* last_error() const override { return error_; }
  Clock& clock() const override { return *clock_; }
  const Endpoint& endpoint() const { return endpoint_; }
  const ConnectionOptions& options() const { return options_; }
  const ConnectionStats& stats() const { return stats_; }
  /// Counters of every primitive using this connection, plus reconnects.
  const Metrics& metrics() const { return metrics_; }
  void reset_metrics() { metrics_.reset(); }
  /// Installs (or with nullptr removes) the hook called after every
  /// operation on this connection and on each reconnect.
  void set_event_hook(EventHook hook, void* context) {
    hook_ = hook;
    hook_context_ = context;
  }
  /// Counts an operation and calls the hook (used by the lock types).
  void note_event(EventKind kind, Status status, Bytes key, Nanos latency);

 private:
  enum class Phase : uint8_t { kIdle, kSending, kReceiving };

  Status ensure_connected(Deadline deadline);
  Status handshake(Deadline deadline);
  Result<const Reply*> wait(Deadline deadline);
  Status encode(Span<const Bytes> args, size_t offset = 0);
  Status encode_eval(bool by_sha, size_t offset = 0);
  // Remembers the eval in flight (to re-send it as EVAL after NOSCRIPT).
  void set_eval(const ScriptCall& call) { eval_ = call; }
  Status begin();
  Result<const Reply*> on_reply(const Reply* reply);
  Status fail(Status s);
  void drop_if_stale();

  Endpoint endpoint_;
  ConnectionOptions options_;
  ResolvedHost addresses_;  // where connects go (setup()/resolve())
  Clock* clock_ = &default_clock();
  bool is_setup_ = false;
  detail::TransportState transport_;
  Phase phase_ = Phase::kIdle;
  uint8_t tx_[kTxBufferSize];
  size_t tx_len_ = 0;
  size_t tx_sent_ = 0;
  // The eval in flight, kept to re-send it as EVAL after NOSCRIPT (no
  // script after a plain command).
  ScriptCall eval_;
  bool eval_by_sha_ = false;  // the eval in flight was sent as EVALSHA
  uint8_t replies_due_ = 1;   // replies still to read for what was sent
  uint32_t failed_connects_ = 0;
  TimePoint next_connect_at_{};
  ConnectionStats stats_;
  Metrics metrics_;
  EventHook hook_ = nullptr;
  void* hook_context_ = nullptr;
  char error_[kErrorTextSize] = {};
};

/// The error code for a Redis error reply ("WRONGPASS ...", "READONLY ...").
ErrorCode classify_error_reply(const char* text, size_t len);

}  // namespace edgelock
