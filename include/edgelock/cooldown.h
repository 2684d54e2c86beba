#pragma once
/// @file cooldown.h
/// "At most once per period" (only one device power-cycles the modem per
/// minute): the SET NX PX pattern, in one script that also returns the
/// remaining cooldown when refused. The period runs on the server's clock.
///
/// Local hint: after an answer the handle knows the key lives at least
/// until (request start + TTL, less the drift allowance) on our monotonic
/// clock, and refuses locally until then without a round trip
/// (Admission::local). It only ever refuses early, never allows: the server
/// decides every grant. Disable with CooldownOptions::local_hint = false
/// (e.g. when an operator may erase_on_server() the key from elsewhere).
///
/// Quorum variant: sound in the Redlock sense for this "N = 1" case (two
/// entries on majorities must meet on one server, whose SET NX refuses the
/// second), with the same clock-drift caveats; not provided here because
/// it needs the quorum fan-out of QuorumLock, and a minority of leftover
/// keys would lengthen the cooldown by up to one period. A quota has no
/// sound quorum variant (see quota.h).

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/admission.h"
#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/detail/rate_gate.h"
#include "edgelock/limits.h"
#include "edgelock/metrics.h"
#include "edgelock/status.h"

namespace edgelock {

struct CooldownOptions {
  /// The period. 1 ms .. kMaxTtl.
  Millis period{60000};
  /// As LockOptions::drift_factor, for the local hint. 0 .. 0.5.
  double drift_factor = 0.01;
  /// Refuse locally while the last answer says the server would refuse.
  bool local_hint = true;
};

class Cooldown {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock; it
  /// must outlive the cooldown.
  explicit Cooldown(Backend& backend) : gate_(backend) {}
  Cooldown(const Cooldown&) = delete;
  Cooldown& operator=(const Cooldown&) = delete;

  /// Sets key and options. No I/O. Errors: kInvalidArgument, kRandomFailed.
  Status init(Bytes key, const CooldownOptions& options = {});
  /// One attempt. OK = allowed, and the period it started is still running
  /// on our clock (less the drift allowance): act now. *out (optional)
  /// says how long until the next one. Errors: kBusy (cooling down;
  /// out->retry_after), kExpired (entered, but the answer came after
  /// the period could have ended: do not act, another entry may already
  /// be allowed), kInvalidArgument (not init()ed, or an operation in flight), kProtocol,
  /// Connection::command()'s (then the entry may have been recorded; on
  /// Sentinel or Cluster with WAIT, kNoQuorum: entered on the primary but
  /// not confirmed by its replicas, do not act).
  Status try_enter(Admission* out = nullptr) { return gate_.try_admit(out); }
  /// Tries until allowed or `wait` has passed (kForever or negative =
  /// forever), sleeping the remaining cooldown (kBusy and kExpired are
  /// retried). Errors: as try_enter().
  Status enter(Nanos wait, Admission* out = nullptr) { return gate_.wait_admit(wait, out); }
  // --- Non-blocking face (docs/nonblocking.md), as Lock's: start_enter()
  // starts enter() and returns kInProgress (then call step() until it
  // returns anything else: enter()'s result), or the final status when it
  // ended at once. The pause between tries is a deadline, never a sleep.
  // Plain Connection, Sentinel or Cluster;
  // one operation at a time.
  /// enter(wait, out); a `wait` of 0 makes it try_enter(out). *out
  /// (optional) must live until the operation ends. Errors: as enter().
  Status start_enter(Nanos wait, Admission* out = nullptr) { return gate_.start_admit(wait, out); }
  /// Moves the operation in flight; kInProgress until it is done, then its
  /// result. Errors: as enter(); kInvalidArgument when none is in flight.
  Status step() { return gate_.step(); }
  /// The connection's socket and poll events while a request is in flight
  /// (at most 1).
  size_t wait_fds(pollfd* out, size_t cap) const { return gate_.wait_fds(out, cap); }
  /// The request's deadline or the pause's end.
  Deadline next_deadline() const { return gate_.next_deadline(); }
  /// Gives the operation in flight up: a request out ends as kTimeout (its
  /// connection is closed; the attempt may have been counted), a pause at
  /// once. No-op when none is in flight.
  void cancel() { gate_.cancel(); }
  /// Time until an entry would be allowed (0 = now), from the server.
  /// Errors: kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Result<Millis> retry_after();
  /// Deletes the cooldown's key on the server (DEL): the next entry, by
  /// any client, is allowed at once. Clears the local hint.
  /// Errors: kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Status erase_on_server() { return gate_.erase_on_server(); }

  Bytes key() const { return gate_.key(); }
  const char* last_error() const { return gate_.last_error(); }
  Connection& connection() const { return gate_.connection(); }

 private:
  detail::RateGate gate_;
  CooldownOptions options_;
};

}  // namespace edgelock
