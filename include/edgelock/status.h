#pragma once
/// @file status.h
/// One error vocabulary for the whole library: an error code, a
/// [[nodiscard]] Status and a Result<T>. No exceptions anywhere.

#include <cstddef>
#include <cstdint>
#include <utility>

namespace edgelock {

/// Every way a call can fail. Codes are stable; to_string() names them.
enum class ErrorCode : uint8_t {
  kOk = 0,
  kTimeout,           ///< The operation's deadline passed.
  kBusy,              ///< The lock is held by someone else.
  kNotOwner,          ///< The lock is not (or no longer) ours.
  kNotHeld,           ///< This handle holds no lock (nothing to release).
  kIo,                ///< A socket read or write failed.
  kConnectionClosed,  ///< The peer closed the connection.
  kConnectFailed,     ///< TCP/unix connect or name resolution failed.
  kProtocol,          ///< The reply broke RESP or was of an unexpected type.
  kServerError,       ///< The server replied with an error (text kept).
  kAuthFailed,        ///< Wrong user name or password.
  kNoAuth,            ///< The server wants AUTH and we sent none.
  kReadOnly,          ///< The server is a read-only replica.
  kOutOfMemory,       ///< The server hit maxmemory (OOM reply).
  kServerBusy,        ///< A script is running on the server (BUSY).
  kLoading,           ///< The server is loading its dataset.
  kBufferTooSmall,    ///< A fixed capacity would be exceeded.
  kInvalidArgument,   ///< A caller-supplied value is out of range.
  kNotConnected,      ///< No connection, and reconnecting is backing off.
  kTls,               ///< TLS handshake or record failure.
  kTlsUnavailable,    ///< Built without TLS, or rediss:// not configured.
  kNoQuorum,          ///< Too few servers answered to form a majority.
  kExpired,           ///< The lease's validity ran out first: a grant or
                      ///< renewal whose reply came too late to use, or (a
                      ///< LeaseKeeper's loss) no renewal in time.
  kIndeterminate,     ///< Sent, outcome unknown; a release was attempted.
  kRandomFailed,      ///< The OS random source failed.
  kTlsUntrusted,      ///< Server certificate chain (or pin) did not verify.
  kTlsCertTime,       ///< A certificate is expired or not yet valid (check the clock).
  kTlsHostMismatch,   ///< Server certificate does not name the host/IP we asked for.
  kMoved,             ///< Cluster: the key's slot lives on another node (MOVED).
  kAsk,               ///< Cluster: the slot is migrating; ask the named node (ASK).
  kTryAgain,          ///< Cluster settling: TRYAGAIN (slot migrating) or CLUSTERDOWN.
  kNoScript,          ///< The server does not have the script (NOSCRIPT).
  kConnectionBusy,    ///< Another handle's request occupies the shared
                      ///< connection (or its queue is full); nothing was sent.
  kInProgress,        ///< Not an error: a started operation is not done yet;
                      ///< call step() again once its fds or deadline say so.
};

/// A short, stable, human-readable name for `code` ("timeout", "busy", ...).
const char* to_string(ErrorCode code);

/// What an error code says about the request that failed with it: one row
/// per code (src/base/status.cc), so every caller classifies errors the same way.
/// kOk and kInProgress have every property false.
struct ErrorTraits {
  /// Another attempt within the caller's wait may succeed: contention
  /// (kBusy, kExpired), a connection that failed (kIo, kConnectionClosed,
  /// kConnectFailed, kNotConnected, kTimeout), a connection another handle
  /// occupies (kConnectionBusy), or a server that is loading or running a
  /// script (kLoading, kServerBusy).
  bool retryable = false;
  /// Nothing of the request reached the server: the call gave up before
  /// writing it (kNotConnected, kConnectFailed, kInvalidArgument,
  /// kConnectionBusy). Safe to
  /// send again, to this server or another. False means "may have been
  /// sent"; TLS failures count as that, conservatively.
  bool not_sent = false;
  /// The request was (or may have been) sent and no reply settled it: lost,
  /// late, unreadable or not ours (kTimeout, kIo, kConnectionClosed,
  /// kProtocol, kTls, kBufferTooSmall, kIndeterminate). The server may or
  /// may not have run it: claim nothing from it, keep what is needed to
  /// undo it (a lock keeps its token and releases later).
  bool outcome_unknown = false;
  /// The server read the request and refused it with an error reply before
  /// running it (kServerError, kAuthFailed, kNoAuth, kReadOnly,
  /// kOutOfMemory, kServerBusy, kLoading, kMoved, kAsk, kTryAgain,
  /// kNoScript): it changed nothing. The library's scripts check before
  /// they write, so a script's error reply counts here too.
  bool server_rejected = false;
  /// The connection to the server failed (kConnectFailed, kNotConnected,
  /// kIo, kConnectionClosed, kTimeout): the server may be down, unreachable
  /// or replaced (a router looks for it again).
  bool connection_failed = false;
  /// The request may have run on the server (and written): an error that
  /// is neither not_sent nor server_rejected. A script's own refusal (kBusy,
  /// kNotOwner) ran and wrote nothing; callers look at those first.
  bool may_have_run = false;
};

/// The properties of `code` (see ErrorTraits).
ErrorTraits traits(ErrorCode code);

/// The error code for a Redis error reply, from its class word: WRONGPASS,
/// NOPERM, "ERR invalid password" and the other AUTH refusals, NOAUTH,
/// READONLY, OOM, BUSY, LOADING, MOVED, ASK, TRYAGAIN, CLUSTERDOWN
/// (kTryAgain), NOSCRIPT; anything else is kServerError.
ErrorCode classify_error_reply(const char* text, size_t len);

/// The outcome of a fallible call. Cheap to copy; must be checked.
class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  constexpr Status(ErrorCode code) : code_(code) {}  // NOLINT: implicit by design

  static constexpr Status ok_status() { return Status(); }

  constexpr bool ok() const { return code_ == ErrorCode::kOk; }
  constexpr ErrorCode code() const { return code_; }
  const char* to_string() const { return edgelock::to_string(code_); }

  /// Explicitly discards a status where ignoring it is the intent.
  constexpr void ignore() const {}

  friend constexpr bool operator==(Status a, Status b) { return a.code_ == b.code_; }
  friend constexpr bool operator!=(Status a, Status b) { return a.code_ != b.code_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
};

/// A value or an error. T must be default-constructible and cheap to move.
template <typename T>
class [[nodiscard]] Result {
 public:
  constexpr Result(T value) : value_(std::move(value)) {}  // NOLINT
  constexpr Result(Status status) : status_(status) {}     // NOLINT
  constexpr Result(ErrorCode code) : status_(code) {}      // NOLINT

  constexpr bool ok() const { return status_.ok(); }
  constexpr Status status() const { return status_; }
  /// The value; meaningful only when ok().
  constexpr const T& value() const { return value_; }
  constexpr T& value() { return value_; }
  constexpr const T& operator*() const { return value_; }
  constexpr const T* operator->() const { return &value_; }

 private:
  T value_{};
  Status status_;
};

}  // namespace edgelock

/// Returns early from the enclosing function if `expr` is not ok.
#define EDGELOCK_TRY(expr)                                       \
  do {                                                           \
    ::edgelock::Status edgelock_try_status_ = (expr);            \
    if (!edgelock_try_status_.ok()) return edgelock_try_status_; \
  } while (0)
