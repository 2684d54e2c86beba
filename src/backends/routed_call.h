#pragma once
// What the Sentinel and Cluster routers share (private): a routed plain
// command, and the errors of a router used before init().

#include "base/error_text.h"
#include "edgelock/backend.h"
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

}  // namespace detail
}  // namespace edgelock
