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

}  // namespace detail
}  // namespace edgelock
