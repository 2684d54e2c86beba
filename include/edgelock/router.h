#pragma once
/// @file router.h
/// Where a lock's commands go when there is more than one server behind one
/// logical store: Sentinel (the current primary, found again after a
/// failover) or Cluster (the primary owning the key's slot, following
/// MOVED/ASK). A Lock built on a Connection talks to that one server and
/// needs no router.

#include <cstddef>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {

class Router {
 public:
  virtual ~Router() = default;

  /// Checks that `key` and its companion keys ("{key}:fence", ...) can be
  /// used together here. Errors: kInvalidArgument.
  virtual Status check_key(Bytes key) = 0;

  /// Runs `script` on the server serving keys[0] (all keys share its slot),
  /// within `deadline`. `replicate`: the script writes, and a positive
  /// integer reply means it granted or extended a lease, which the router
  /// may confirm with its replicas (WAIT) before reporting success. The
  /// reply lives until the router's next command.
  /// Errors: Connection::command()'s; kInvalidArgument (router not set
  /// up, no keys); kNoQuorum (too few replicas acknowledged the write);
  /// kBufferTooSmall (a redirect needs a node beyond the fixed capacity);
  /// kServerError (also: more than kMaxRedirects redirects); kTimeout (also:
  /// the deadline passed while a slot migration or failover settled);
  /// kNotConnected (also: no sentinel named a reachable primary).
  virtual Result<const Reply*> eval(const Script& script, const Bytes* keys, size_t nkeys,
                                    const Bytes* args, size_t nargs, bool replicate,
                                    Deadline deadline) = 0;

  /// Runs a plain command about `key` on the server serving it.
  /// Errors: as eval() except kNoQuorum.
  virtual Result<const Reply*> command(Bytes key, const Bytes* args, size_t count,
                                       Deadline deadline) = 0;

  /// The connection that currently serves `key` (for stats and logs).
  virtual Connection& connection_for(Bytes key) = 0;
  /// The time source of every connection behind the router.
  virtual Clock& clock() const = 0;
  /// The per-command budget the lock uses when the caller gives none.
  virtual Nanos command_timeout() const = 0;
  /// The last error's text (fixed buffer, never null).
  virtual const char* last_error() const = 0;
};

}  // namespace edgelock
