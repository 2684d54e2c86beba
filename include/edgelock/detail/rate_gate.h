#pragma once
// Internal: what RateLimiter holds by composition (src/lease/rate_gate.cc):
// a lease core (key, back end, counters, the operation in flight and its
// driver), the decision script with its arguments, and the local refusal
// hint. Fixed size, no heap.

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/admission.h"
#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/metrics.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// A limiter's decision: `script` on KEYS[1] = the key, with ARGV =
/// args[0 .. nargs) as decimal text, returns {allowed, remaining, pttl}.
/// args[0] is the limit (peek() counts what is left of it).
struct RateRule {
  const Script* script = nullptr;
  int64_t args[2] = {};
  size_t nargs = 0;
};

class RateGate {
 public:
  explicit RateGate(Backend& backend) : core_(backend) {}
  RateGate(const RateGate&) = delete;
  RateGate& operator=(const RateGate&) = delete;

  /// Checks and keeps the key, the rule and the hint settings; `ttl` is
  /// the window (1 ms .. kMaxTtl). Changes nothing on error.
  /// Errors: kInvalidArgument (bad key, ttl, drift_factor outside 0 ..
  /// 0.5, no script), kRandomFailed.
  Status init(Bytes key, const RateRule& rule, Millis ttl, double drift_factor, bool local_hint);
  /// One attempt: refused locally while the hint holds, else the server's
  /// decision; counted in the metrics either way. *out (optional) is
  /// filled in. Errors: kBusy (refused), kExpired (allowed, but the answer
  /// came after the window it counted in could have ended),
  /// kInvalidArgument (not init()ed, or an operation in flight), kProtocol,
  /// Connection::command()'s (on Sentinel or Cluster Backend::eval()'s,
  /// kNoQuorum: counted on the primary, not confirmed by its replicas; do
  /// not act).
  Status try_admit(Admission* out) { return wait_admit(Nanos::zero(), out); }
  /// Attempts until allowed or `wait` has passed (0: one attempt; negative
  /// = forever), pausing what the server said between tries (kBusy and
  /// kExpired are retried). Errors: as try_admit().
  Status wait_admit(Nanos wait, Admission* out);

  // --- Non-blocking face: the blocking calls are this machine driven by
  // LeaseCore::run(). A back end LeaseCore::steps() serves.
  /// Starts wait_admit(wait, out) and returns kInProgress (then step()
  /// until it returns anything else), or the final status when it ended
  /// at once. *out (optional) must live until the operation ends.
  /// Errors: as try_admit(); kInvalidArgument also on a back end that
  /// cannot route.
  Status start_admit(Nanos wait, Admission* out);
  /// Moves the operation in flight; kInProgress until it is done, then its
  /// result. Errors: the operation's; kInvalidArgument when none is in
  /// flight.
  Status step();
  size_t wait_fds(pollfd* out, size_t cap) const { return core_.wait_fds(out, cap); }
  Deadline next_deadline() const { return core_.next_deadline(); }
  /// Ends the operation in flight: a request out ends as kTimeout (its
  /// connection closed), a pause ends at once. No-op when none is.
  void cancel() { core_.cancel(&RateGate::step_of, this); }

  /// What is left of the limit, from the key's counter and PTTL, in *out
  /// (nothing counted), as a start: step() until it ends. Errors:
  /// kInvalidArgument (no key, null `out`, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Status start_peek(Admission* out) { return begin_peek(out, true); }
  Result<Admission> peek();
  /// Deletes the key on the server (DEL) and clears the hint, as a start.
  /// Errors: kInvalidArgument (no key, or an operation in flight),
  /// kProtocol, Connection::command()'s.
  Status start_erase() { return begin_erase(true); }
  Status erase() { return core_.run(begin_erase(false), &RateGate::step_of, this); }

  Bytes key() const { return core_.key(); }
  const char* last_error() const { return core_.last_error(); }
  Backend& backend() const { return core_.backend(); }

 private:
  static Status step_of(void* self) { return static_cast<RateGate*>(self)->step(); }
  static Status again_of(void* self, Deadline deadline);
  static Status reply_of(void* self, const Result<const Reply*>& r);
  Status begin_admit(Nanos wait, Admission* out, bool nonblocking);
  Status begin_peek(Admission* out, bool nonblocking);
  Status begin_erase(bool nonblocking);
  Status on_peek(const Result<const Reply*>& r);
  Status attempt(Deadline deadline);
  Status decide(const Result<const Reply*>& r);
  Status attempt_done(Status s);

  bool local_hint_ = true;
  bool hinted_ = false;
  Admission* out_ = &own_;  // the operation's answer: the caller's or own_
  const Script* script_ = nullptr;
  size_t nargs_ = 0;
  int64_t limit_ = 0;  // the rule's args[0]
  TimePoint refuse_until_{};
  TimePoint req_start_{};  // the attempt's request left after this
  Admission own_;
  // The request's words; num[] holds the rule's arguments as sent.
  RequestWords<2, 2> words_;
  LeaseCore core_;
};

}  // namespace detail
}  // namespace edgelock
