#pragma once
// Shared pieces of the benchmark programs (tools, not library code): the
// command line, a fixed log-linear latency histogram that can live in
// shared memory, CLOCK_MONOTONIC stamps and the one-line JSON report.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace bench {

constexpr int kMaxUrls = 8;

struct Args {
  const char* workload = "uncontended";
  const char* urls[kMaxUrls] = {};
  int nurls = 0;
  long cycles = 10000;
  int clients = 4;
  long ttl_ms = 10000;
  long hold_us = -1;  // -1: workload default
  bool json = false;
  bool no_wake = false;      // edgelock: LockOptions::wake_on_release = false
  bool no_fencing = false;   // edgelock quorum: QuorumOptions::fencing = false
  const char* mode = "seq";  // baseline: seq | par
  const char* key = "edgelock-bench";
};

/// Parses the flags shared by both programs. Prints usage and returns
/// false on an unknown or malformed flag.
bool parse_args(int argc, char** argv, Args* out, const char* program);

/// CLOCK_MONOTONIC in ns: comparable across processes on one host.
int64_t now_ns();
/// Sleeps (or, under 200 us, spins) for `us` microseconds.
void hold_for_us(long us);

/// Log-linear histogram of nanosecond values: 64 sub-buckets per power of
/// two (< 1.6% error). Fixed size, atomic counters, so one instance in a
/// MAP_SHARED page collects samples from several processes.
class Histogram {
 public:
  static constexpr int kSub = 64;
  static constexpr int kBuckets = 59 * kSub;
  void add(int64_t ns);
  uint64_t count() const { return total_.load(std::memory_order_relaxed); }
  /// The value at quantile q (0..1), in ns; 0 if empty.
  int64_t quantile(double q) const;

 private:
  std::atomic<uint32_t> counts_[kBuckets] = {};
  std::atomic<uint64_t> total_{0};
};

/// Zeroed memory shared with forked children (MAP_SHARED | MAP_ANONYMOUS).
void* alloc_shared(size_t bytes);

/// Peak resident set of this process (VmHWM), kB.
long own_max_rss_kb();

struct Report {
  const char* peer = "edgelock";
  const char* workload = "";
  long cycles = 0;
  double seconds = 0;
  const Histogram* latency = nullptr;  // per cycle / per grant
  const Histogram* handoff = nullptr;  // nullptr: not applicable
  double commands_per_grant = -1;      // < 0: not applicable
  long errors = 0;
  long max_rss_kb = 0;  // of forked clients; the report takes the max with its own
};

/// Prints the JSON line (json) or a short human-readable summary.
void print_report(const Report& r, bool json);

/// The quorum workload (quorum_workload.cc, when QuorumLock is built).
int run_quorum(const Args& a, Histogram& latency);

}  // namespace bench
