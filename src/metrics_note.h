#pragma once
// Counting one operation (private): into the handle's own block and the
// connection's (which also calls the event hook).

#include "edgelock/connection.h"
#include "edgelock/metrics.h"

namespace edgelock {
namespace detail {

void note(Connection& conn, Metrics& own, EventKind kind, Status status, Bytes key, Nanos latency);

}  // namespace detail
}  // namespace edgelock
