#pragma once
// Small helpers shared by the primitives (private): which errors leave an
// outcome unknown, which are worth a retry, and reading script replies.

#include <cstdint>

#include "edgelock/reply.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// Whether a request that failed with `c` may still have run on the server
/// (sent, but its reply was lost, late or unreadable): its outcome is
/// unknown. Only error replies (our scripts check before they write) and
/// failures before anything was sent are definite "did not run".
inline bool may_have_run(ErrorCode c) {
  switch (c) {
    case ErrorCode::kOk:
    case ErrorCode::kServerError:
    case ErrorCode::kReadOnly:
    case ErrorCode::kOutOfMemory:
    case ErrorCode::kServerBusy:
    case ErrorCode::kLoading:
    case ErrorCode::kNoAuth:
    case ErrorCode::kAuthFailed:
    case ErrorCode::kNotConnected:
    case ErrorCode::kConnectFailed:
    case ErrorCode::kInvalidArgument:
      return false;
    default:
      return true;
  }
}

/// Errors an acquire loop may retry within its wait.
inline bool retryable(ErrorCode c) {
  switch (c) {
    case ErrorCode::kBusy:
    case ErrorCode::kExpired:
    case ErrorCode::kIo:
    case ErrorCode::kConnectionClosed:
    case ErrorCode::kConnectFailed:
    case ErrorCode::kNotConnected:
    case ErrorCode::kTimeout:
    case ErrorCode::kLoading:
    case ErrorCode::kServerBusy:
      return true;
    default:
      return false;
  }
}

/// Whether a reply element is an integer; its value in *out.
inline bool int_at(const Reply* r, size_t i, int64_t* out) {
  if (!r || r->type != ReplyType::kArray || i >= r->count) return false;
  if (r->elements[i].type != ReplyType::kInteger) return false;
  *out = r->elements[i].integer;
  return true;
}

}  // namespace detail
}  // namespace edgelock
