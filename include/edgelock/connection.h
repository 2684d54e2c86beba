#pragma once
/// @file connection.h
/// One connection to one Redis server: fixed buffers, one deadline per
/// operation, sticky error text, reconnect with bounded backoff.
///
/// Lifecycle (Mbed TLS style): construct, init() (parses and keeps the
/// options: no I/O), then use; the first command connects.
/// Connect/reconnect allocate (hiredis's context while a socket connect starts, freed before
/// that step returns; the TLS session, kept until the connection closes);
/// commands after that allocate nothing. A reply returned by a command
/// stays valid until the next command on this connection.
///
/// What may block: only the host name lookup (getaddrinfo, which has no
/// timeout of ours and allocates). resolve() is that lookup, the one call
/// that may block, to be called at set-up. DNS may stay at set-up: call
/// resolve() after init() to keep the lookup out of your loop. A host name
/// not looked up yet when a connect starts is looked up once by that
/// connect, which then blocks for the lookup only. An IP literal or a unix
/// socket is never looked up: init() takes its address as it is. Every
/// other connect and reconnect goes to the addresses found then and never
/// calls the resolver. A connect is a sequence of steps of the same state machine
/// that moves requests, none of which waits: a non-blocking socket connect
/// to each address in turn (the next one when one fails), the TLS
/// handshake one message per step, then AUTH and SELECT written together
/// (one round trip) and their replies read, all within min(deadline,
/// connect_timeout). The non-blocking engine (detail/connection_io.h)
/// takes these steps in advance() when the socket is ready for
/// wait_events() or step_deadline() passed, so a reconnect inside a
/// primitive's step() or a keeper's step() never holds up the caller's
/// loop. The blocking calls (connect(), command(), eval()) are loops over
/// the same steps with one wait. TLS still verifies (and sends as SNI) the
/// host name from the URL. After the server moves to a new address, call
/// resolve().
///
/// Sockets are close-on-exec from their creation, on every connect and
/// reconnect: a child started with fork+exec never inherits one.
///
/// Several handles (and a keeper) may share one connection: it carries one
/// request at a time, and a handle whose start finds it occupied by
/// another's request waits its turn in a fixed queue (Meson option
/// max_queued_handles; one more gets kConnectionBusy), in order. A waiting
/// acquire on a shared connection retries with backoff instead of blocking
/// on the release signal, so it never holds the connection for longer
/// than one request. A request's reply is read by its own handle's step():
/// a blocking call that finds another handle's request in flight waits for
/// it only until its own deadline (kConnectionBusy, nothing sent).
///
/// Every failure leaves the connection usable: idle, or closed (the next
/// command reconnects). The non-blocking engine the primitives' start/step
/// face uses is not part of this face: see detail/connection_io.h.

#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/redirect.h"
#include "edgelock/detail/resp_parser.h"
#include "edgelock/detail/socket_transport.h"
#include "edgelock/detail/transport.h"
#include "edgelock/endpoint.h"
#include "edgelock/metrics.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
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
  /// The byte stream to use instead of the built-in socket/TLS transport
  /// (edgelock/detail/transport.h, an internal seam: a scripted fake in
  /// tests, a simulated network); nullptr = built in.
  /// Not owned: it must outlive the connection, and serves this one
  /// connection only. Host names are then never looked up: the transport
  /// gets the endpoint as parsed. Sentinel and Cluster refuse it.
  Transport* transport = nullptr;
};

/// Counters kept by a connection (fixed size, no heap).
struct ConnectionStats {
  uint32_t connects = 0;  ///< Successful connects, first one included.
  uint32_t connect_failures = 0;
  uint32_t commands = 0;   ///< Commands sent (EVAL retries included).
  uint32_t io_errors = 0;  ///< Connections dropped by an error/timeout.
  uint32_t lookups = 0;    ///< Host name lookups (resolve(), a first connect).
};

namespace detail {
class ConnectionIo;
}  // namespace detail

class Connection final : public Backend {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  /// Parses `url` and keeps the options. No I/O: an IP literal (IPv4, or
  /// IPv6 with or without a scope) or a unix socket is its own address; a
  /// host name is looked up by resolve() or, if that was not called, by the
  /// first connect. Calling it again replaces the options (an open
  /// connection is closed).
  /// Errors: kInvalidArgument (bad URL or timeouts; see last_error()),
  /// kBufferTooSmall (a part of the URL exceeds its capacity),
  /// kTlsUnavailable (rediss:// in a build without TLS).
  Status init(const char* url, const ConnectionOptions& options = {});
  /// As above with an already parsed endpoint. Errors: kInvalidArgument
  /// (bad timeouts), kTlsUnavailable.
  Status init(const Endpoint& endpoint, const ConnectionOptions& options = {});

  /// Looks the host name up (getaddrinfo: blocks on DNS with no timeout of
  /// ours, allocates): the one call here that may block, for set-up, and
  /// again after the server moved to a new address. The next connect uses
  /// the new addresses; an open connection stays as it is. IP literals,
  /// unix sockets and a custom transport: no I/O. On failure the old
  /// addresses are kept, and a connect does not look the name up again
  /// (it fails with kConnectFailed) until resolve() succeeds.
  /// Errors: kConnectFailed (the name does not resolve; see last_error()),
  /// kInvalidArgument (before init()).
  Status resolve();
  /// The addresses connects try, in order (empty for unix sockets and
  /// while a host name is not looked up or its lookup failed).
  const ResolvedHost& addresses() const { return addresses_; }

  /// Connects now: socket, TLS, AUTH, SELECT, all within `deadline` (and
  /// connect_timeout), to the addresses resolve() found; a host name never
  /// looked up is looked up first, once (blocking on DNS, see resolve()).
  /// Blocks: the connect's steps with a wait between them.
  /// Errors: kConnectFailed (refused, unreachable, or the host name does
  /// not resolve), kTimeout, kTls, kTlsUntrusted, kTlsCertTime,
  /// kTlsHostMismatch, kTlsUnavailable, kAuthFailed,
  /// kNoAuth, kServerError, kIo, kConnectionClosed, kProtocol,
  /// kBufferTooSmall, kInvalidArgument (before init()).
  Status connect(Deadline deadline);
  Status connect() { return connect(Deadline::after(clock(), options_.connect_timeout)); }
  /// Closes the connection (a command in flight is given up). The next
  /// command reconnects.
  void close();
  bool is_connected() const { return state_ >= State::kIdle; }

  /// Sends a command and waits for its reply until `deadline`, connecting
  /// first if needed (also when the idle connection turned out to be closed
  /// or to hold unsolicited input). Error replies become errors (text in last_error()).
  /// The reply lives until the next command on this connection.
  /// Errors: everything connect() returns, kNotConnected (reconnect backing
  /// off), kTimeout, kIo, kConnectionClosed, kProtocol, kBufferTooSmall,
  /// kConnectionBusy (another request is in flight on it), kInvalidArgument
  /// (before init()), and for an error reply: kServerError,
  /// kAuthFailed, kNoAuth, kReadOnly, kOutOfMemory, kServerBusy, kLoading,
  /// kMoved, kAsk, kTryAgain (a cluster node), kNoScript (EVALSHA).
  Result<const Reply*> command(Span<const Bytes> args, Deadline deadline);
  /// EVALSHA call.script, falling back to EVAL on NOSCRIPT (restart, SCRIPT
  /// FLUSH), all within `deadline`. call.writes_lease changes nothing (one
  /// server has no replicas to confirm). The library's own scripts always
  /// fit the command buffer as EVAL (checked at build time); a caller's
  /// script whose EVAL does not fit fails with kBufferTooSmall after the
  /// NOSCRIPT, and the connection stays usable. Without call.script it
  /// sends call.args as command() does. Errors: as command(),
  /// kInvalidArgument (more than 13 keys (with companions) and arguments,
  /// companions without a key).
  Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) override;

  /// The last error's text (fixed buffer, NUL-terminated, never null).
  const char* last_error() const override { return error_; }
  Clock& clock() const override { return *clock_; }
  const Endpoint& endpoint() const { return endpoint_; }
  const ConnectionOptions& options() const { return options_; }
  const ConnectionStats& stats() const { return stats_; }
  /// Counters of every primitive using this connection (handles keep none
  /// of their own; a quorum lock's rounds are not counted), plus reconnects.
  const Metrics& metrics() const { return metrics_; }
  /// Installs (or with nullptr removes) the hook called after every
  /// operation on this connection and on each reconnect.
  void set_event_hook(EventHook hook, void* context) {
    hook_ = hook;
    hook_context_ = context;
  }

 private:
  friend class detail::ConnectionIo;

  // --- Backend routing, for the primitives (they call these through
  // Backend&): one server, so every key is fine and served here.
  // As command(args, deadline).
  Result<const Reply*> command(Bytes key, Span<const Bytes> args, Deadline deadline) override {
    (void)key;
    return command(args, deadline);
  }
  // Always ok.
  Status check_key(Bytes key) override {
    (void)key;
    return Status();
  }
  Connection& connection_for(Bytes key) override {
    (void)key;
    return *this;
  }
  Connection* direct() override { return this; }
  Nanos command_timeout() const override { return options_.command_timeout; }

  // Where the connection is (src/connection/connection.cc and src/connection/connection_connect.cc
  // have the transitions).
  enum class State : uint8_t {
    kUnconfigured,  // before init()
    kDisconnected,  // no stream; the next command connects
    kBackingOff,    // the last connect failed: none before next_connect_at_
    kConnecting,    // the transport opens (socket connect, TLS handshake)
    kHandshaking,   // AUTH/SELECT written from hs_, then their replies read
    kIdle,          // connected, nothing owed either way
    kSending,       // writing tx_[tx_sent_, tx_len_); replies_due_ follow it
    kReceiving,     // reading replies_due_ replies (more than one: pipelined)
  };
  // AUTH user password and SELECT db, encoded (into the receive buffer's
  // free space: it is empty while they are written, and their replies are
  // read only once they are written whole).
  static constexpr size_t kHandshakeSize = kMaxUserLen + kMaxPasswordLen + 96;
  static_assert(kHandshakeSize <= kRxBufferSize, "AUTH and SELECT fit the receive buffer");

  Status before_init();
  bool name_unresolved() const;
  Status leave(Status s);
  void drop();
  void back_off();
  Status prepare();
  Status launch(uint8_t replies, Deadline deadline);
  // The connect in steps (src/connection/connection_connect.cc).
  Status start_connect(Deadline deadline, uint8_t queued);
  Result<const Reply*> advance_connect();
  Result<const Reply*> start_handshake();
  Result<const Reply*> step_handshake();
  Result<const Reply*> read_handshake();
  Status check_handshake_reply(const Reply& reply);
  Result<const Reply*> connected();
  Status fail_connect(Status s);
  Status abandon_connect();
  bool connecting() const { return state_ == State::kConnecting || state_ == State::kHandshaking; }
  Deadline step_deadline() const;
  Status encode(Span<const Bytes> args, size_t offset, const Bytes* suffixes = nullptr);
  Status encode_eval(bool by_sha, size_t offset);
  void begin(uint8_t replies);
  Result<size_t> read(bool may_wait);
  Result<const Reply*> send_some();
  Result<const Reply*> pull_reply(const char** why);
  Result<const Reply*> receive();
  Result<const Reply*> on_reply(const Reply* reply);
  void note_loaded(const Reply* reply);
  bool script_loaded(const Script* script) const;
  Status await(Deadline deadline);
  Result<const Reply*> wait(Deadline deadline);
  // The engine behind detail::ConnectionIo.
  Status start_command(Span<const Bytes> args, Deadline deadline);
  Status start_eval(const ScriptCall& call, Deadline deadline, bool by_sha = true);
  Result<const Reply*> advance();
  Result<const Reply*> advance_pipeline();
  Status pipeline_eval(const ScriptCall& call);
  Status start_command_then_eval(Span<const Bytes> args, const ScriptCall& call, Deadline deadline,
                                 bool by_sha = true);
  Result<const Reply*> command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                         Deadline deadline, Status* first);
  Status abandon();
  Status reject_reply(const char* what);
  short wait_events() const;
  bool busy() const { return state_ >= State::kConnecting && state_ != State::kIdle; }
  void note_event(EventKind kind, Status status, Bytes key, Nanos latency);
  // Handles sharing this connection (src/connection/connection_share.cc).
  bool turn_of(const void* owner, bool in_order) const;
  Status queue_turn(const void* owner);
  void leave_queue(const void* owner);
  Status refuse_busy(const char* why);

  Endpoint endpoint_;
  ConnectionOptions options_;
  ResolvedHost addresses_;  // where connects go (init() for a literal, else resolve())
  Clock* clock_ = &default_clock();
  Transport* transport_ = &socket_;  // socket_, or options_.transport
  detail::SocketTransport socket_;
  State state_ = State::kUnconfigured;
  uint8_t replies_due_ = 0;   // replies still to read for what was sent
  bool eval_by_sha_ = false;  // the eval in flight was sent as EVALSHA
  // A NOSCRIPT came back for a request that could not be re-sent (another
  // was queued behind it): the next eval goes by body, loading its script.
  bool by_body_next_ = false;
  resp::Redirect redirect_;  // the last reply's MOVED/ASK, decoded
  // The oldest reply due answers an EVALSHA of this script (else null).
  const Script* head_sha_ = nullptr;
  static constexpr uint8_t kLoadedScripts = 8;
  const Script* loaded_[kLoadedScripts] = {};  // see note_loaded()
  uint8_t loaded_n_ = 0;
  bool may_block_ = true;  // await() may still wait in the read itself
  uint8_t turns_n_ = 0;
  // Handles waiting for their turn to start a request, oldest first.
  const void* turns_[kMaxQueuedHandles] = {};
  uint32_t failed_connects_ = 0;
  TimePoint next_connect_at_{};
  // The connect under way: its deadline, the replies of the request
  // waiting for it, and AUTH/SELECT: their bytes, what of them is written,
  // the replies still to read.
  Deadline connect_deadline_ = Deadline::never();
  uint8_t queued_replies_ = 0;
  uint8_t hs_due_ = 0;
  uint16_t hs_len_ = 0;
  uint16_t hs_sent_ = 0;
  const uint8_t* hs_ = nullptr;
  size_t tx_len_ = 0;
  size_t tx_sent_ = 0;
  uint8_t tx_[kTxBufferSize];
  resp::Parser rx_;  // the receive buffer and the replies read from it
  // The eval in flight, kept to re-send it as EVAL after NOSCRIPT (no
  // script after a plain command).
  ScriptCall eval_;
  ConnectionStats stats_;
  Metrics metrics_;
  EventHook hook_ = nullptr;
  void* hook_context_ = nullptr;
  char error_[kErrorTextSize] = {};
};

}  // namespace edgelock
