#pragma once
// Durations at the wire (private): Redis counts TTLs in whole ms (PX,
// PEXPIRE, PTTL, script arguments and results), the API in std::chrono.
// Every ms integer we send goes through ms_arg().

#include "edgelock/clock.h"

namespace edgelock {
namespace detail {

/// The ms integer a Redis argument carries for `d`.
constexpr long long ms_arg(Millis d) { return static_cast<long long>(d.count()); }

/// Whole ms from `now` until `until`, rounded up (never reports "now"
/// early); 0 once `until` has passed.
constexpr Millis ms_until(TimePoint until, TimePoint now) {
  return until > now ? std::chrono::ceil<Millis>(until - now) : Millis(0);
}

}  // namespace detail
}  // namespace edgelock
