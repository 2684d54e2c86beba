#pragma once
// One simulated run's set-up, all drawn from its seed (a few can be forced
// from the command line): topology, workloads, timings and fault rates.

#include <cstdint>
#include <string>
#include <vector>

namespace edgelock {
namespace sim {

enum class Work : uint8_t {
  kLock,          // Lock: acquire, hold, maybe extend/owned, release
  kLockKeeper,    // Lock renewed by a LeaseKeeper while held
  kQuorum,        // QuorumLock over every server
  kQuorumKeeper,  // QuorumLock renewed by a LeaseKeeper
  kSemaphore,     // Semaphore permits (N from the config)
  kReentrant,     // ReentrantLock, entered twice at times
  kCooldown,      // RateLimiter, limit 1: acquire / try_acquire
  kQuota,         // RateLimiter, limit quota_max: acquire / try_acquire
  kFair,          // FairLock: queued waits, waiters that die or freeze
  // From a poll loop on the non-blocking face (start_*, step, cancel):
  kLockLoop,         // Lock, 2-3 keys
  kQuorumLoop,       // QuorumLock
  kSemaphoreLoop,    // Semaphore permits, 2-3 keys
  kReentrantLoop,    // ReentrantLock: depth 2, partial release, a shared owner
  kSemaphoreKeeper,  // Semaphore permits renewed by a LeaseKeeper
  kReentrantKeeper,  // ReentrantLock renewed by a LeaseKeeper
};
constexpr Work kLastWork = Work::kReentrantKeeper;
const char* work_name(Work w);

struct RunOverrides {
  int clients = 0;               // 0: from the seed
  int servers = 0;               // 0: from the seed
  int work = -1;                 // -1: from the seed, else a Work for every client
  bool data_loss = false;        // restarts may lose the data (Redlock's limit)
  bool delayed_restart = false;  // ... but stay down longer than a TTL
  bool strict_cleanup = false;   // no exemption for abandoned single-server commands
  bool no_faults = false;
  double fault_scale = 1.0;   // multiplies every fault rate
  bool late_replies = false;  // always the late-reply profile (below)
};

struct RunConfig {
  uint64_t seed = 1;
  int clients = 2;
  int servers = 1;
  std::vector<Work> work;  // per client
  int64_t ttl_ms = 1000;
  int64_t command_timeout_ms = 200;
  int64_t period_ms = 500;  // rate limiter window
  int quota_max = 3;
  int permits = 1;
  double drift_factor = 0.01;
  int64_t ppm_max = 4500;  // |clock rate error|, each process
  bool wake_on_release = true;
  bool password = false;
  int db = 0;
  // Time line (ns of true time).
  int64_t fault_phase_ns = 0;  // faults only before this
  int64_t stop_at_ns = 0;      // workloads end their cycle after this
  int64_t limit_ns = 0;        // a run still going then has hung
  // Network.
  int64_t delay_min_ns = 20000;
  int64_t delay_max_ns = 2000000;
  double p_tail = 0;  // a message delayed long (up to past the TTL)
  int64_t tail_min_ns = 0;
  int64_t tail_max_ns = 0;
  double p_reset_before = 0;  // a request lost with its connection
  double p_reset_after = 0;   // a reply lost with its connection
  // Faults: mean number per second of the fault phase, and the kinds used.
  double faults_per_s = 0;
  bool data_loss = false;
  bool delayed_restart = false;
  bool strict_cleanup = false;
  bool print_trace = false;  // every trace line to stdout
  bool quiet = false;        // no violation report (mutation scans)

  static RunConfig from_seed(uint64_t seed, const RunOverrides& o);
  std::string describe() const;
  bool quorum() const { return servers > 1; }
};

}  // namespace sim
}  // namespace edgelock
