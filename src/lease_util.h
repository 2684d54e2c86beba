#pragma once
// Small helpers shared by the primitives (private): decimal arguments in
// fixed buffers, conservative local validity, which errors are worth a retry.

#include <cstdint>
#include <cstdio>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/reply.h"
#include "edgelock/status.h"
#include "duration.h"
#include "validity.h"

namespace edgelock {
namespace detail {

/// A decimal number kept in place, for script arguments.
struct DecimalText {
  char text[24] = {};
  size_t len = 0;
  explicit DecimalText(int64_t v = 0) { set(v); }
  /// A duration as the server counts it: whole ms.
  explicit DecimalText(Millis d) { set(ms_arg(d)); }
  void set(int64_t v) {
    const int n = std::snprintf(text, sizeof text, "%lld", static_cast<long long>(v));
    len = n > 0 ? static_cast<size_t>(n) : 0;
  }
  Bytes bytes() const { return Bytes(text, len); }
};

/// When a lease of `ttl` asked for at `start` stops being safe to use
/// locally: the server's clock may run faster than ours by `drift_factor`.
inline TimePoint lease_end(TimePoint start, Millis ttl, double drift_factor) {
  return validity_end(start, ttl, drift_factor);
}

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

/// The earlier of `valid_until` and the end a request sent at `start` for
/// `ttl` may have set: after an unknown outcome (e.g. a shortening extend
/// whose reply was lost) the validity is the least of the two.
inline TimePoint least_end(TimePoint valid_until, TimePoint start, Millis ttl, double drift_factor) {
  const TimePoint could_be = lease_end(start, ttl, drift_factor);
  return could_be < valid_until ? could_be : valid_until;
}

/// `d`, but no later than `valid_until` while that is still ahead of `now`:
/// a renewal must not keep waiting once the validity it renews has ended.
inline Deadline capped_at(Deadline d, TimePoint valid_until, TimePoint now) {
  return valid_until > now ? d.min(Deadline::at(valid_until)) : d;
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
