#pragma once
// One eval or plain command for a router to send (private), shared by the
// Sentinel and Cluster routers; each adds what it routes by.

#include <cstddef>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

struct RoutedCall {
  const Script* script;  // nullptr: a plain command
  const Bytes* keys;
  size_t nkeys;
  const Bytes* args;
  size_t nargs;

  /// Sends it on `conn`. Errors: Connection::command()'s.
  Result<const Reply*> send_on(Connection& conn, Deadline deadline) const {
    if (script) return conn.eval(*script, keys, nkeys, args, nargs, deadline);
    return conn.command(args, nargs, deadline);
  }
};

}  // namespace detail
}  // namespace edgelock
