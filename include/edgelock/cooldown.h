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
/// (e.g. when an operator may reset() the key from elsewhere).
///
/// Quorum variant: sound in the Redlock sense for this "N = 1" case (two
/// entries on majorities must meet on one server, whose SET NX refuses the
/// second), with the same clock-drift caveats; not provided here because
/// it needs the quorum fan-out of QuorumLock, and a minority of leftover
/// keys would lengthen the cooldown by up to one period. A quota has no
/// sound quorum variant (see quota.h).

#include <cstdint>

#include "edgelock/admission.h"
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

class Cooldown : protected detail::RateGate {
 public:
  explicit Cooldown(Connection& conn) : RateGate(conn) {}
  Cooldown(const Cooldown&) = delete;
  Cooldown& operator=(const Cooldown&) = delete;

  /// Sets key and options. No I/O. Errors: kInvalidArgument.
  Status init(Bytes key, const CooldownOptions& options = {});
  /// One attempt. OK = allowed, and the period it started is still running
  /// on our clock (less the drift allowance): act now. *out (optional)
  /// says how long until the next one. Errors: kBusy (cooling down;
  /// out->retry_after), kExpired (entered, but the answer came after
  /// the period could have ended: do not act, another entry may already
  /// be allowed), kInvalidArgument (not init()ed), kProtocol,
  /// Connection::command()'s (then the entry may have been recorded).
  Status try_enter(Admission* out = nullptr);
  /// Tries until allowed or `wait` has passed (kForever or negative =
  /// forever),
  /// sleeping the remaining cooldown (kBusy and kExpired are retried).
  /// Errors: as try_enter().
  Status enter(Nanos wait, Admission* out = nullptr);
  /// Time until an entry would be allowed (0 = now), from the server.
  /// Errors: kInvalidArgument, kProtocol, Connection::command()'s.
  Result<Millis> retry_after();
  /// Ends the cooldown now (DEL) and clears the local hint.
  /// Errors: kInvalidArgument, kProtocol, Connection::command()'s.
  Status reset();

  using RateGate::key;
  using RateGate::connection;
  using RateGate::connection_error;
  using RateGate::metrics;

 private:
  Status send(Admission* out) override;

  CooldownOptions options_;
};

}  // namespace edgelock
