#pragma once
/// @file rate_limiter.h
/// "At most M times per window", counted on the server: a fixed-window
/// counter whose TTL, on the server's clock, is the window. One script
/// checks and counts; refused attempts are not counted, so the counter
/// never exceeds M and the answer says how many are left and how long
/// until the window ends.
///
/// Limit 1 (the default) is a cooldown: "only one device power-cycles the
/// modem per minute". A larger limit is a quota (like the DECR-based
/// download limit). The window is fixed, starting at the first allowed
/// attempt: for M >= 2 up to 2*M can pass within one window length across
/// a boundary (as with any fixed window). Every user of a key must pass
/// the same limit and window.
///
/// Local hint: once the server says the window is used up, the handle
/// refuses locally until (request start + window TTL, less the drift
/// allowance) on our monotonic clock, without a round trip
/// (Admission::local). It never allows on its own: the server decides
/// every grant. Disable it with RateLimiterOptions::local_hint = false
/// (e.g. when an operator may erase_on_server() the key from elsewhere).
///
/// No quorum variant: for M >= 2 it is unsound. Each attempt would be
/// counted on a majority of servers, but with 3 servers and M = 2 the
/// attempts {s1,s2}, {s2,s3}, {s1,s3} each win a majority while every
/// server counts only 2: three admissions. For M = 1 it would be sound (two
/// majorities meet on one server, which refuses the second) but would need
/// QuorumLock's fan-out, and a minority of leftover keys would lengthen the
/// cooldown by up to one window.

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/admission.h"
#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/rate_gate.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {

struct RateLimiterOptions {
  /// Attempts allowed per window; 1 (the default) makes it a cooldown: at
  /// most once per window. 1 .. 2^31 - 1.
  int64_t limit = 1;
  /// The window. 1 ms .. kMaxTtl.
  Millis window{60000};
  /// As LockOptions::drift_factor, for the local hint. 0 .. 0.5.
  double drift_factor = 0.01;
  /// Refuse locally while the last answer says the window is used up.
  bool local_hint = true;
};

class RateLimiter {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock; it
  /// must outlive the limiter.
  explicit RateLimiter(Backend& backend) : gate_(backend) {}
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  /// Sets key and options. No I/O. Errors: kInvalidArgument, kRandomFailed.
  Status init(Bytes key, const RateLimiterOptions& options = {});
  /// One attempt. OK = allowed and counted, and the window it was counted
  /// in is still running on our clock (less the drift allowance): act now.
  /// *out (optional) has what is left and when the window ends (for limit
  /// 1, remaining 0 and retry_after the window). Errors: kBusy (used up;
  /// out->retry_after), kExpired (counted, but the answer came after that
  /// window could have ended: do not act, another attempt may already be
  /// allowed), kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s (then the attempt may have been
  /// counted; on Sentinel or Cluster with WAIT, kNoQuorum: counted on the
  /// primary but not confirmed by its replicas, do not act).
  Status try_acquire(Admission* out = nullptr) { return gate_.try_admit(out); }
  /// Tries until allowed or `wait` has passed (kForever or negative =
  /// forever), sleeping until the window ends (kBusy and kExpired are
  /// retried). Errors: as try_acquire().
  Status acquire(Nanos wait, Admission* out = nullptr) { return gate_.wait_admit(wait, out); }
  // --- Non-blocking face (docs/nonblocking.md), as Lock's: start_acquire()
  // starts acquire() and returns kInProgress (then call step() until it
  // returns anything else: acquire()'s result), or the final status when
  // it ended at once. The pause between tries is a deadline, never a
  // sleep. Plain Connection, Sentinel or Cluster; one operation at a time.
  /// acquire(wait, out); a `wait` of 0 makes it try_acquire(out). *out
  /// (optional) must live until the operation ends. Errors: as acquire().
  Status start_acquire(Nanos wait, Admission* out = nullptr) {
    return gate_.start_admit(wait, out);
  }
  /// Moves the operation in flight; kInProgress until it is done, then its
  /// result. Errors: as acquire(); kInvalidArgument when none is in flight.
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
  /// What is left without counting an attempt (allowed = remaining > 0;
  /// retry_after = time until an attempt would be allowed, 0 = now).
  /// Errors: kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Result<Admission> peek() { return gate_.peek(); }
  /// peek() as steps: once step() ends with ok, *out holds the answer
  /// (*out must live until then). Errors: as peek(); kInvalidArgument also
  /// for a null `out`.
  Status start_peek(Admission* out) { return gate_.start_peek(out); }
  /// Deletes the limiter's key on the server (DEL): a fresh window starts
  /// for every client. Clears the local hint.
  /// Errors: kInvalidArgument (not init()ed, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Status erase_on_server() { return gate_.erase(); }
  /// erase_on_server() as steps. Errors: as erase_on_server().
  Status start_erase_on_server() { return gate_.start_erase(); }

  Bytes key() const { return gate_.key(); }
  const char* last_error() const { return gate_.last_error(); }

 private:
  detail::RateGate gate_;
};

}  // namespace edgelock
