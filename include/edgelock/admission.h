#pragma once
/// @file admission.h
/// The answer of a rate limiter (Cooldown, Quota): allowed or not, and how
/// long until the next attempt can succeed.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {

struct Admission {
  bool allowed = false;
  /// Time until the next attempt may be allowed: 0 = now. After an allowed
  /// cooldown entry this is the period; for a quota with attempts left, 0.
  Millis retry_after{0};
  /// Attempts still allowed in the current window (quota); 0 for cooldown.
  int64_t remaining = 0;
  /// True if answered from the local hint without asking the server.
  bool local = false;
};

}  // namespace edgelock
