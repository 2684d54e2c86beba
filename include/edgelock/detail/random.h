#pragma once
/// @file detail/random.h
/// Internal: not part of the public API.
/// Randomness: owner tokens from the OS (getrandom), and a small PRNG for
/// retry jitter only (never for tokens), and the capped exponential backoff
/// it draws from.

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/status.h"

namespace edgelock {

/// Fills `out` with `n` bytes from getrandom(). Blocks until the kernel's
/// pool is initialised (early boot): a weak token would be worse than a wait.
/// Errors: kRandomFailed.
Status random_bytes(uint8_t* out, size_t n);

/// Writes 2*n lower-case hex characters of `n` random bytes into `hex`
/// (no NUL). Errors: kRandomFailed.
Status random_hex(char* hex, size_t n);

/// xorshift64*: fast, tiny, good enough to spread retries. Not secret.
class Prng {
 public:
  explicit Prng(uint64_t seed = 0x9E3779B97F4A7C15ull) : state_(seed ? seed : 1) {}
  /// Seeds from the OS. Errors: kRandomFailed.
  Status seed_from_os();
  uint64_t next();
  /// Uniform in [lo, hi] (hi >= lo).
  int64_t uniform(int64_t lo, int64_t hi);
  /// A duration uniform in [lo, hi] (hi >= lo), to the nanosecond.
  Nanos uniform(Nanos lo, Nanos hi) { return Nanos(uniform(lo.count(), hi.count())); }

 private:
  uint64_t state_;
};

/// Capped exponential backoff with jitter, for retrying a busy lock. The
/// delay is never zero, so a waiter never busy-spins.
class Backoff {
 public:
  /// Delays grow from `min` and are capped at `max` (min > 0, max >= min).
  /// `attempt`: delays already drawn (next() goes on from there).
  Backoff(Nanos min, Nanos max, uint32_t attempt = 0)
      : min_(min), max_(max), attempt_(attempt < kMaxStep ? attempt : kMaxStep) {}
  void reset() { attempt_ = 0; }
  /// The next delay: uniform in [min, min(max, min * 2^attempt)].
  Nanos next(Prng& rng);
  uint32_t attempt() const { return attempt_; }

 private:
  static constexpr uint32_t kMaxStep = 64;  // the cap doubles at most this often
  Nanos min_;
  Nanos max_;
  uint32_t attempt_ = 0;
};

}  // namespace edgelock
