// Cooldown: SET NX PX in one script, with a local refusal hint (the shared
// mechanics are in rate_gate.cc).
#include "edgelock/cooldown.h"

#include "lease_util.h"
#include "rate_scripts.h"

namespace edgelock {

Status Cooldown::init(Bytes key, const CooldownOptions& options) {
  if (options.period < Millis(1) || options.period > kMaxTtl) return ErrorCode::kInvalidArgument;
  const Status s = init_gate(key, options.drift_factor, options.local_hint);
  if (!s.ok()) return s;
  options_ = options;
  return Status();
}

Status Cooldown::try_enter(Admission* out) { return try_admit(out); }

Status Cooldown::enter(Nanos wait, Admission* out) { return wait_admit(wait, out); }

Status Cooldown::send(Admission* a) {
  const detail::DecimalText period(options_.period);
  const Bytes args[1] = {period.bytes()};
  const TimePoint start = connection().clock().now();
  const Result<const Reply*> r = eval_key(detail::kCooldownScript, args);
  if (!r.ok()) return r.status();
  int64_t ok = 0, pttl = 0;
  if (!detail::int_at(r.value(), 0, &ok) || !detail::int_at(r.value(), 1, &pttl) || pttl < 0) {
    return ErrorCode::kProtocol;
  }
  const Millis ttl(pttl);
  a->allowed = ok == 1;
  a->retry_after = ttl;
  // The key was (re)armed no earlier than `start`: it lives at least this
  // long on our clock, less the drift allowance.
  set_hint(true, start, ttl);
  return admitted(a, start, ttl);
}

Result<Millis> Cooldown::retry_after() {
  int64_t pttl = 0;
  const Status s = peek_key(&pttl, nullptr);
  if (!s.ok()) return s;
  return Millis(pttl > 0 ? pttl : 0);
}

Status Cooldown::reset() { return reset_key(); }

}  // namespace edgelock
