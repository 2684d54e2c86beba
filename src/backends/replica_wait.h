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

/// After a write on `conn` answered `reply`: only a grant or extension (a
/// positive integer, or an array whose first element is one: the
/// semaphore's, reentrant lock's and rate limiters' answers) needs `want`
/// replicas. Then it is copied to keep[0] (an array's integer elements to
/// keep[1..3]: WAIT's reply replaces it in the arena), WAITed for and
/// returned from there; any other reply, or want == 0, is returned as it
/// is. Errors: as wait_for_replicas(); kProtocol (a grant array too long or
/// not all integers: fail closed).
Result<const Reply*> confirm_write(Connection& conn, const Reply* reply, int want, Nanos max_wait,
                                   Deadline deadline, Reply (&keep)[4],
                                   char (&err)[kErrorTextSize]);

}  // namespace detail
}  // namespace edgelock
