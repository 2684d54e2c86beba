#pragma once
// Clocks of the simulated world. True time (ns since the run began) is the
// event queue's; every process reads its own clock, which starts at its own
// offset and runs at its own rate (parts per million off true time), so a
// server may run faster or slower than each client, within the drift the
// library allows for.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {
namespace sim {

struct ClockRate {
  int64_t offset_ns = 0;
  int64_t ppm = 0;  // > 0: runs fast

  // 64-bit arithmetic only (32-bit targets have no __int128): t * ppm stays
  // below 2^63 for runs of up to ~20 days of true time.
  int64_t local(int64_t t) const { return offset_ns + t + t * ppm / 1000000; }
  /// The first true instant at which this clock reads `l` or more.
  int64_t true_at(int64_t l) const {
    const int64_t d = l - offset_ns;
    int64_t t = d - d * ppm / (1000000 + ppm);
    while (local(t) < l) ++t;
    while (local(t - 1) >= l) --t;
    return t;
  }
};

class World;

/// A client process's clock, as the library sees it (injected through
/// ConnectionOptions::clock). sleep_for() hands the fiber back to the
/// scheduler until the clock has moved on that far.
class SimClock final : public Clock {
 public:
  SimClock(World* world, int client) : world_(world), client_(client) {}
  TimePoint now() override;
  void sleep_for(Nanos d) override;

 private:
  World* world_;
  int client_;
};

}  // namespace sim
}  // namespace edgelock
