#pragma once
// Conservative local validity of a lease (private), shared by every lock
// type: validity = ttl - elapsed - drift, where drift = ttl * factor + 2 ms
// allows for the server's clock running faster than ours.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {
namespace detail {

constexpr Nanos drift_of(Millis ttl, double factor) {
  return Nanos(static_cast<Nanos::rep>(static_cast<double>(Nanos(ttl).count()) * factor)) +
         Millis(2);
}

/// The end of a lease whose request left no earlier than `start`: usable
/// until start + ttl - drift on our monotonic clock.
constexpr TimePoint validity_end(TimePoint start, Millis ttl, double factor) {
  return start + ttl - drift_of(ttl, factor);
}

/// The end of a lease after a request for `ttl` (sent at `start`) whose
/// outcome is unknown (timeout, lost reply, WAIT unconfirmed): it may or
/// may not have been applied (a shortening extend too), so the lease is
/// only good until the earlier of `old_end` and what the request could
/// have set.
constexpr TimePoint least_end(TimePoint old_end, TimePoint start, Millis ttl, double factor) {
  const TimePoint e = validity_end(start, ttl, factor);
  return e < old_end ? e : old_end;
}

}  // namespace detail
}  // namespace edgelock
