#pragma once
// Internal: which failures make a Sentinel look its primary up again, for
// the blocking calls (sentinel.cc) and the steps (sentinel_step.cc).

#include "edgelock/status.h"

namespace edgelock {
namespace detail {

// The command surely did not run on a primary: safe to send again after
// looking the primary up again (a replica refused it, or nothing was sent
// because the connection failed).
inline bool retry_after_resolve(ErrorCode c) {
  const ErrorTraits t = traits(c);
  return c == ErrorCode::kReadOnly || (t.connection_failed && t.not_sent);
}

// Worth asking the sentinels again after a pause (failover in progress):
// the node is unreachable, a replica, or loading / busy for a while.
inline bool transient(ErrorCode c) {
  const ErrorTraits t = traits(c);
  return t.connection_failed || c == ErrorCode::kReadOnly || (t.server_rejected && t.retryable);
}

// The connection failed after the command was sent: its fate is unknown,
// and the primary may be gone.
inline bool outcome_unknown(ErrorCode c) {
  const ErrorTraits t = traits(c);
  return t.connection_failed && !t.not_sent;
}

}  // namespace detail
}  // namespace edgelock
