#pragma once
// Internal: what the rate limiters Cooldown and Quota share (src/rate_gate.cc):
// the key, the local refusal hint, metrics, the bounded wait loop, and the
// peek and reset commands. A limiter supplies only its one-script decision,
// send(). Fixed size, no heap.

#include <cstddef>
#include <cstdint>

#include "edgelock/admission.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/limits.h"
#include "edgelock/metrics.h"
#include "edgelock/reply.h"
#include "edgelock/script.h"
#include "edgelock/span.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

class RateGate {
 public:
  RateGate(const RateGate&) = delete;
  RateGate& operator=(const RateGate&) = delete;

  Bytes key() const { return Bytes(key_, key_len_); }
  Connection& connection() const { return *conn_; }
  const char* connection_error() const { return conn_->last_error(); }
  const Metrics& metrics() const { return metrics_; }

 protected:
  explicit RateGate(Connection& conn) : conn_(&conn) {}
  // Never deleted through a RateGate pointer (the base is not public).
  ~RateGate() = default;

  /// The server's decision on one attempt: fills *out (already cleared) and
  /// sets the hint. Errors: kBusy (refused), kExpired (allowed too late, see
  /// admitted()), kProtocol, Connection::command()'s.
  virtual Status send(Admission* out) = 0;

  /// Checks and copies the key, keeps the hint settings and clears the hint;
  /// changes nothing on error. The caller checks its own options first.
  /// Errors: kInvalidArgument (bad key, drift_factor outside 0 .. 0.5).
  Status init_gate(Bytes key, double drift_factor, bool local_hint);
  /// One attempt: refused locally while the hint holds, else send(); counted
  /// in the metrics either way. Errors: send()'s, kInvalidArgument (no key).
  Status try_admit(Admission* out);
  /// try_admit() until allowed or `wait` has passed (negative = forever),
  /// sleeping what the server said between tries (kBusy and kExpired are
  /// retried). Errors: as try_admit().
  Status wait_admit(Nanos wait, Admission* out);
  /// Runs `script` on the key within one command timeout.
  /// Errors: Connection::command()'s.
  Result<const Reply*> eval_key(const Script& script, Span<const Bytes> args);
  /// The key's PTTL as the server counts it (*pttl, ms; -2 no key, -1 no
  /// expiry) and, if `used` is set, its counter (kRatePeekScript).
  /// Errors: kInvalidArgument (no key), kProtocol, Connection::command()'s.
  Status peek_key(int64_t* pttl, int64_t* used);
  /// Deletes the key and clears the hint.
  /// Errors: kInvalidArgument (no key), kProtocol, Connection::command()'s.
  Status reset_key();
  /// The status of an answer the server gave (*a filled in) to a request
  /// sent no earlier than `start`, whose period/window had `ttl` left:
  /// an allowed answer is usable only while that surely lasts on our clock;
  /// later, acting on it could overlap the next period or window.
  /// Errors: kBusy (refused), kExpired (allowed too late: `allowed` is
  /// cleared; the attempt was counted on the server).
  Status admitted(Admission* a, TimePoint start, Millis ttl);
  /// `on`: refuse locally until the key, (re)armed no earlier than `start`
  /// with `ttl` left, surely still lives on our clock. Else clears it.
  void set_hint(bool on, TimePoint start, Millis ttl);

 private:
  Connection* conn_;
  uint8_t key_[kMaxKeyLen] = {};
  size_t key_len_ = 0;
  double drift_factor_ = 0.01;
  bool local_hint_ = true;
  bool hinted_ = false;
  TimePoint refuse_until_{};
  Metrics metrics_;
};

}  // namespace detail
}  // namespace edgelock
