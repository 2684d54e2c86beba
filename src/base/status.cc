// The error vocabulary: one row per code (its name and what it says about
// the request, see ErrorTraits in status.h), and the class of an error reply.
#include "edgelock/status.h"

#include <cstring>

namespace edgelock {

namespace {

enum : uint8_t {
  kRetry = 1 << 0,     // retryable
  kNotSent = 1 << 1,   // not_sent
  kUnknown = 1 << 2,   // outcome_unknown
  kRejected = 1 << 3,  // server_rejected
  kConnLost = 1 << 4,  // connection_failed
};

struct Row {
  ErrorCode code;
  uint8_t flags;
  const char* name;
};

constexpr Row kRows[] = {
    {ErrorCode::kOk, 0, "ok"},
    {ErrorCode::kTimeout, kRetry | kUnknown | kConnLost, "timeout"},
    {ErrorCode::kBusy, kRetry, "busy"},
    {ErrorCode::kNotOwner, 0, "not owner"},
    {ErrorCode::kNotHeld, 0, "not held"},
    {ErrorCode::kIo, kRetry | kUnknown | kConnLost, "I/O error"},
    {ErrorCode::kConnectionClosed, kRetry | kUnknown | kConnLost, "connection closed"},
    {ErrorCode::kConnectFailed, kRetry | kNotSent | kConnLost, "connect failed"},
    {ErrorCode::kProtocol, kUnknown, "protocol error"},
    {ErrorCode::kServerError, kRejected, "server error"},
    {ErrorCode::kAuthFailed, kRejected, "authentication failed"},
    {ErrorCode::kNoAuth, kRejected, "authentication required"},
    {ErrorCode::kReadOnly, kRejected, "read-only server"},
    {ErrorCode::kOutOfMemory, kRejected, "server out of memory"},
    {ErrorCode::kServerBusy, kRetry | kRejected, "server busy running a script"},
    {ErrorCode::kLoading, kRetry | kRejected, "server loading dataset"},
    {ErrorCode::kBufferTooSmall, kUnknown, "buffer too small"},
    {ErrorCode::kInvalidArgument, kNotSent, "invalid argument"},
    {ErrorCode::kNotConnected, kRetry | kNotSent | kConnLost, "not connected"},
    {ErrorCode::kTls, kUnknown, "TLS error"},
    {ErrorCode::kTlsUnavailable, 0, "TLS unavailable"},
    {ErrorCode::kNoQuorum, 0, "no quorum"},
    {ErrorCode::kExpired, kRetry, "lease validity ran out"},
    {ErrorCode::kIndeterminate, kUnknown, "indeterminate"},
    {ErrorCode::kRandomFailed, 0, "random source failed"},
    {ErrorCode::kTlsUntrusted, 0, "TLS certificate not trusted"},
    {ErrorCode::kTlsCertTime, 0, "TLS certificate expired or not yet valid"},
    {ErrorCode::kTlsHostMismatch, 0, "TLS host name mismatch"},
    {ErrorCode::kMoved, kRejected, "moved"},
    {ErrorCode::kAsk, kRejected, "ask"},
    {ErrorCode::kTryAgain, kRejected, "try again"},
    {ErrorCode::kNoScript, kRejected, "no script"},
    {ErrorCode::kConnectionBusy, kRetry | kNotSent, "connection busy"},
    {ErrorCode::kInProgress, 0, "in progress"},
};

constexpr size_t kRowCount = sizeof kRows / sizeof kRows[0];

// Row i must describe code i: looked up by index, never searched.
constexpr bool rows_in_order() {
  for (size_t i = 0; i < kRowCount; ++i) {
    if (static_cast<size_t>(kRows[i].code) != i) return false;
  }
  return true;
}
static_assert(rows_in_order(), "kRows must list every ErrorCode in declaration order");
static_assert(static_cast<size_t>(ErrorCode::kInProgress) + 1 == kRowCount,
              "every ErrorCode needs a row in kRows");

// Error replies by their first word. A prefix ending in a space must be
// followed by more text; the others may end the reply.
struct ReplyClass {
  const char* prefix;
  ErrorCode code;
};

constexpr ReplyClass kReplyClasses[] = {
    {"WRONGPASS", ErrorCode::kAuthFailed}, {"ERR invalid password", ErrorCode::kAuthFailed},
    {"ERR AUTH", ErrorCode::kAuthFailed},  {"ERR Client sent AUTH", ErrorCode::kAuthFailed},
    {"NOPERM", ErrorCode::kAuthFailed},    {"NOAUTH", ErrorCode::kNoAuth},
    {"READONLY", ErrorCode::kReadOnly},    {"OOM", ErrorCode::kOutOfMemory},
    {"BUSY", ErrorCode::kServerBusy},      {"LOADING", ErrorCode::kLoading},
    {"MOVED ", ErrorCode::kMoved},         {"ASK ", ErrorCode::kAsk},
    {"TRYAGAIN", ErrorCode::kTryAgain},    {"CLUSTERDOWN", ErrorCode::kTryAgain},
    {"NOSCRIPT", ErrorCode::kNoScript},
};

}  // namespace

const char* to_string(ErrorCode code) {
  const size_t i = static_cast<size_t>(code);
  return i < kRowCount ? kRows[i].name : "unknown error";
}

ErrorTraits traits(ErrorCode code) {
  const size_t i = static_cast<size_t>(code);
  const uint8_t f = i < kRowCount ? kRows[i].flags : 0;
  ErrorTraits t;
  t.retryable = (f & kRetry) != 0;
  t.not_sent = (f & kNotSent) != 0;
  t.outcome_unknown = (f & kUnknown) != 0;
  t.server_rejected = (f & kRejected) != 0;
  t.connection_failed = (f & kConnLost) != 0;
  // kInProgress is no outcome yet: nothing to say about the request.
  t.may_have_run =
      code != ErrorCode::kOk && code != ErrorCode::kInProgress && !t.not_sent && !t.server_rejected;
  return t;
}

ErrorCode classify_error_reply(const char* text, size_t len) {
  for (const ReplyClass& c : kReplyClasses) {
    const size_t n = std::strlen(c.prefix);
    if (len >= n && std::memcmp(text, c.prefix, n) == 0) return c.code;
  }
  return ErrorCode::kServerError;
}

}  // namespace edgelock
