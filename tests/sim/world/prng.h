#pragma once
// The simulation's random numbers: splitmix64, seeded per run and per
// stream (network, faults, each client), so one stream's use does not shift
// another's.

#include <cmath>
#include <cstdint>

namespace edgelock {
namespace sim {

class Prng {
 public:
  explicit Prng(uint64_t seed = 1) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi].
  int64_t uniform(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double unit() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  bool chance(double p) { return unit() < p; }
  /// Log-uniform in [lo, hi]: as many values per decade, for durations
  /// that span several orders of magnitude.
  int64_t log_uniform(int64_t lo, int64_t hi) {
    if (hi <= lo || lo <= 0) return lo;
    const double l = std::log(static_cast<double>(lo)), h = std::log(static_cast<double>(hi));
    const int64_t v = static_cast<int64_t>(std::exp(l + (h - l) * unit()));
    return v < lo ? lo : (v > hi ? hi : v);
  }
  template <typename T, size_t N>
  const T& pick(const T (&a)[N]) {
    return a[next() % N];
  }

 private:
  uint64_t s_;
};

/// A stream seed derived from the run seed and a stream number.
inline uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  Prng p(seed ^ (stream * 0xD1B54A32D192ED03ull));
  p.next();
  return p.next();
}

}  // namespace sim
}  // namespace edgelock
