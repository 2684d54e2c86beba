#pragma once
/// @file backend.h
/// Where a primitive's commands go: one server (a Connection), the current
/// primary behind Redis Sentinel (found again after a failover), or the
/// primary owning the key's slot in a Redis Cluster (following MOVED/ASK).
/// Connection, Sentinel and Cluster implement it.

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {

struct Reply;  // edgelock/reply.h: only pointers to it here

class Connection;
namespace detail {
class LeaseCore;
struct LeaseRouter;
}  // namespace detail

/// What a request routed by a caller's loop does after an error reply or a
/// failure (Backend::on_routed_error()).
struct RouteNext {
  /// Send the request again to this node (nullptr: see pause, then status).
  Connection* node = nullptr;
  /// Send ASKING first, in the same write (an ASK redirect).
  bool asking = false;
  /// With no node: send again to the same node after this pause (> 0).
  Nanos pause{0};
  /// With the pause: send to wherever route_for() (or route_pending())
  /// names once it is over, not to the same node (the node is gone).
  bool again = false;
  /// With no node and no pause: the request's outcome.
  Status status;
};

class Backend {
 public:
  /// Runs `call` on the server serving call.keys[0] (all keys share its
  /// slot), within `deadline`: EVALSHA, falling back to EVAL on NOSCRIPT.
  /// With call.writes_lease, a replicated back end may confirm a positive
  /// integer reply with its replicas (WAIT) before reporting success. The
  /// reply lives until the back end's next command.
  /// Errors: Connection::command()'s; kInvalidArgument (not set up, no
  /// script, no keys where routing needs one, more than 13 keys (with
  /// companions) and arguments, companions without a key); kNoQuorum (too
  /// few replicas acknowledged the write); kBufferTooSmall (the EVAL does
  /// not fit the command buffer, or a redirect needs a node beyond the
  /// fixed capacity); kServerError (also: more than kMaxRedirects
  /// redirects); kTimeout (also: the deadline passed while a slot migration
  /// or failover settled); kNotConnected (also: no sentinel named a
  /// reachable primary).
  virtual Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) = 0;

  /// Runs the plain command `args` about `key` on the server serving it.
  /// Errors: as eval() except kNoQuorum.
  virtual Result<const Reply*> command(Bytes key, Span<const Bytes> args, Deadline deadline) = 0;

  /// The connection that currently serves `key` (for stats and logs).
  virtual Connection& connection_for(Bytes key) = 0;
  /// The time source of every connection behind the back end.
  virtual Clock& clock() const = 0;
  /// The last error's text (fixed buffer, NUL-terminated, never null).
  virtual const char* last_error() const = 0;

 protected:
  // Routing, for the lease core alone (detail::LeaseCore, a friend): a
  // back end overrides these; nothing else calls them.
  friend class detail::LeaseCore;
  /// Checks that `key` and its companion keys ("{key}:fence", ...) can be
  /// used together here. Errors: kInvalidArgument.
  virtual Status check_key(Bytes key) = 0;
  /// The per-command budget a primitive uses when the caller gives none.
  virtual Nanos command_timeout() const = 0;

  /// The one connection when the back end is a plain Connection (for what
  /// only one connection can do: pipelined waits, BLPOP); else nullptr.
  virtual Connection* direct() { return nullptr; }

  // --- Routing for the non-blocking face (LeaseCore's start/step): the
  // back end picks a node and follows redirects without blocking; the
  // caller's loop moves the bytes (a lookup of the node, route_pending(),
  // is moved by the caller's steps too). The defaults say "not served": a
  // plain Connection is used directly (direct()).

  /// The routed steps (&detail::LeaseCore::kRouter) while route_for()
  /// serves start/step operations; nullptr (the default): not served.
  /// They are reached through it alone, so a program without a back end
  /// that routes does not link them.
  virtual const detail::LeaseRouter* router() const { return nullptr; }
  /// The node to send a request about `key` to now, from what is known
  /// (no I/O, never blocks); nullptr if none.
  virtual Connection* route_for(Bytes key) {
    static_cast<void>(key);
    return nullptr;
  }
  /// route_for() named no node: a lookup of the node may be under way.
  /// Advances it with non-blocking I/O only (a step's worth: it never
  /// waits) and says where to send the request now (node), to ask again
  /// after `pause` (the lookup goes on), or its outcome (status). The
  /// default: no node will come (kInvalidArgument).
  virtual RouteNext route_pending(Bytes key) {
    static_cast<void>(key);
    RouteNext next;
    next.status = ErrorCode::kInvalidArgument;
    return next;
  }
  /// After a request about `key` routed to `node` failed with `s` (an error
  /// reply or a connection failure): where to send it next, when, or that
  /// `s` (or a more specific error) is its outcome. No I/O, never blocks.
  virtual RouteNext on_routed_error(Connection& node, Bytes key, Status s) {
    static_cast<void>(node);
    static_cast<void>(key);
    RouteNext next;
    next.status = s;
    return next;
  }

  /// A routed write's reply `reply` from `node` (ScriptCall::writes_lease):
  /// with replicas to confirm it (wait_replicas), starts that WAIT on
  /// `node` and returns ok with no reply (the WAIT's reply goes to
  /// end_confirm()); else the outcome now: `reply`, or an error. Never
  /// blocks.
  virtual Result<const Reply*> start_confirm(Connection& node, const Reply* reply,
                                             Deadline deadline) {
    static_cast<void>(node);
    static_cast<void>(deadline);
    return reply;
  }
  /// That WAIT's reply (or its failure): the write's reply, kept, or an
  /// error (kNoQuorum: too few replicas acknowledged; the WAIT's error).
  virtual Result<const Reply*> end_confirm(Connection& node, const Result<const Reply*>& wait) {
    static_cast<void>(node);
    return wait;
  }

  Backend() = default;
  // A copy has no handles of its own yet.
  Backend(const Backend&) {}
  Backend& operator=(const Backend&) { return *this; }  // NOLINT(cert-oop54-cpp): copies nothing
  // Not deleted through this interface: the owner holds the concrete type.
  ~Backend() = default;

 private:
  // Handles using this back end (LeaseCore counts itself in and out):
  // with more than one, no handle may hold a connection behind it in a
  // BLPOP, on a plain Connection or on a Sentinel's or Cluster's node.
  uint32_t leases_ = 0;
};

}  // namespace edgelock
