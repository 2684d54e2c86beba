#pragma once
// WAIT after a write (private), shared by the Sentinel and Cluster routers,
// in their blocking calls and as steps: a grant is reported only once
// enough replicas have it.

#include "edgelock/connection.h"

namespace edgelock {
namespace detail {

/// After a write on `conn` answered `reply`: only a grant or extension (a
/// positive integer, or an array whose first element is one: the
/// semaphore's, reentrant lock's and rate limiters' answers) needs `want`
/// replicas. Then it is copied to keep[0] (an array's integer elements to
/// keep[1..3]: WAIT's reply replaces it in the arena) and `WAIT want
/// timeout` is started on `conn`; the timeout, kept in *sent, is
/// `max_wait` cut to half of what is left of `deadline`, so the reply
/// arrives in time. Returns ok with no reply: the WAIT's outcome comes from
/// end_confirm(). Any other reply, or want == 0, is returned as it is. Errors: kProtocol (a
/// grant array too long or not all integers: fail closed),
/// Connection::start_command()'s.
Result<const Reply*> start_confirm(Connection& conn, const Reply* reply, int want, Nanos max_wait,
                                   Deadline deadline, Reply (&keep)[4], Millis* sent,
                                   char (&err)[kErrorTextSize]);

/// The WAIT's reply (or its failure) `wait`: the grant kept in keep[0], or
/// the error (text in `err`). Errors: Connection::command()'s, kProtocol,
/// kNoQuorum (fewer than `want` acknowledged).
Result<const Reply*> end_confirm(Connection& conn, const Result<const Reply*>& wait, int want,
                                 const Reply (&keep)[4], Millis sent, char (&err)[kErrorTextSize]);

/// Both, blocking (the back ends' blocking calls).
Result<const Reply*> confirm_write(Connection& conn, const Reply* reply, int want, Nanos max_wait,
                                   Deadline deadline, Reply (&keep)[4],
                                   char (&err)[kErrorTextSize]);

}  // namespace detail
}  // namespace edgelock
