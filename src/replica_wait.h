#pragma once
// WAIT after a write (private), shared by the Sentinel and Cluster routers:
// a grant is reported only once enough replicas have it.

#include "edgelock/connection.h"

namespace edgelock {
namespace detail {

/// Sends `WAIT want timeout` on `conn`, the connection that just wrote. The
/// timeout is `max_wait`, cut to half of what is left of `deadline` so the
/// reply arrives in time (at least 1 ms). Errors: Connection::command()'s,
/// kProtocol, kNoQuorum (fewer than `want` acknowledged; text in `err`).
Status wait_for_replicas(Connection& conn, int want, Nanos max_wait, Deadline deadline,
                         char (&err)[kErrorTextSize]);

}  // namespace detail
}  // namespace edgelock
