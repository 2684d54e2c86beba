#pragma once
/// @file admission.h
/// The answer of a RateLimiter: allowed or not, how many attempts are left
/// and how long until the next attempt can succeed.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {

struct Admission {
  bool allowed = false;
  /// Time until the next attempt may be allowed: 0 = now. 0 while attempts
  /// are left; once the window is used up (for limit 1: right after the
  /// allowed attempt), the time until it ends.
  Millis retry_after{0};
  /// Attempts still allowed in the current window; for limit 1, 0 after an
  /// allowed attempt.
  int64_t remaining = 0;
  /// True if answered from the local hint without asking the server.
  bool local = false;
};

}  // namespace edgelock
