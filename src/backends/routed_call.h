#pragma once
// Sends one routed call on the connection a router picked (private), shared
// by the Sentinel and Cluster routers: an eval, or with no script a plain
// command whose words are call.args.

#include "base/error_text.h"
#include "edgelock/backend.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// A plain command as a routed call: no script, the command in args.
inline ScriptCall plain_command(Span<const Bytes> args) {
  ScriptCall call;
  call.args = args;
  return call;
}

/// A router used before its init(): kInvalidArgument, with `what` ("cluster",
/// "sentinel") named in err.
inline Status not_initialized(const char* what, char (&err)[kErrorTextSize]) {
  set_error(err, "%s used before init()", what);
  return ErrorCode::kInvalidArgument;
}

/// route_pending()'s answer before init(): the request ends (see
/// not_initialized()).
inline RouteNext unrouted(const char* what, char (&err)[kErrorTextSize]) {
  RouteNext next;
  next.status = not_initialized(what, err);
  return next;
}

/// Sends `call` on `conn`. Errors: Connection::command()'s, and
/// Connection::eval()'s for an eval.
inline Result<const Reply*> send_routed(Connection& conn, const ScriptCall& call,
                                        Deadline deadline) {
  if (call.script) return conn.eval(call, deadline);
  return conn.command(call.args, deadline);
}

}  // namespace detail
}  // namespace edgelock
