#pragma once
// Conservative local validity of a lease (private), shared by every lock
// type: validity = ttl - elapsed - drift, where drift = ttl * factor + 2 ms
// allows for the server's clock running faster than ours.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {
namespace detail {

constexpr Nanos drift_of(int64_t ttl_ms, double factor) {
  return static_cast<Nanos>(static_cast<double>(millis(ttl_ms)) * factor) + millis(2);
}

/// The end of a lease whose request left no earlier than `start`: usable
/// until start + ttl - drift on our monotonic clock.
constexpr Nanos validity_end(Nanos start, int64_t ttl_ms, double factor) {
  return start + millis(ttl_ms) - drift_of(ttl_ms, factor);
}

/// The end of a lease after an extend to `ms` (asked for at `start`) whose
/// outcome is unknown (timeout, lost reply, WAIT unconfirmed): it may or
/// may not have been applied, so the lease is only good until the earlier
/// of `old_end` and what the new TTL could have set.
constexpr Nanos end_after_unknown_extend(Nanos old_end, Nanos start, int64_t ms, double factor) {
  const Nanos e = validity_end(start, ms, factor);
  return e < old_end ? e : old_end;
}

/// A renewal's deadline: `d`, but no later than the lease's validity end
/// `valid_until` while that is still ahead of `now` (waiting past it would
/// only delay the caller's reaction to the loss).
constexpr Deadline capped_at_validity(Deadline d, Nanos valid_until, Nanos now) {
  return valid_until > now ? d.min(Deadline::at(valid_until)) : d;
}

}  // namespace detail
}  // namespace edgelock
