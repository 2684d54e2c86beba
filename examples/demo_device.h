#pragma once
// The contention demo's shared state: one simulated hardware device that
// checks fencing tokens itself, plus the demo's counters and event log. It
// lives in one MAP_SHARED mapping made before the workers are forked.

#include <sys/mman.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <new>

namespace demo {

constexpr int kMaxWorkers = 64;
constexpr int kMaxWaits = 8192;

// CLOCK_BOOTTIME, the library's default clock: beliefs built from a lock's
// remaining() are on the clock that measured it (it counts suspend).
inline int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// What each worker believes: "I hold the device lock until valid_until".
// The lock's local validity ends before the server's TTL, so two slots
// with overlapping beliefs would be a real mutual-exclusion failure.
struct Belief {
  std::atomic<int64_t> valid_until{0};  // CLOCK_BOOTTIME ns; 0 = not holding
  std::atomic<uint64_t> fence{0};
};

struct Device {
  int64_t start_ns = 0;
  int64_t stop_ns = 0;  // workers take no new grant after this
  std::atomic<bool> stop{false};
  // The device's own fencing check.
  std::atomic<uint64_t> max_fence{0};
  std::atomic<int> writes_accepted{0};
  std::atomic<int> stale_rejected{0};
  // Demo counters.
  std::atomic<int> grants{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> hangs{0};
  std::atomic<int> lost_detected{0};
  std::atomic<int> crashes{0};
  std::atomic<int> errors{0};
  std::atomic<int> gave_up{0};  // waits that ended without a grant
  std::atomic<int> renewals{0};
  // Fairness: grants per worker; during each wait, how often each other
  // worker was granted (first come, first served allows at most once).
  std::atomic<int> grants_of[kMaxWorkers] = {};
  std::atomic<int> most_passes{0};   // most grants to one other worker in one wait
  std::atomic<int> passed_twice{0};  // waits in which another worker went twice
  Belief beliefs[kMaxWorkers];
  std::atomic<int> n_waits{0};
  int64_t waits_us[kMaxWaits] = {};

  static Device* create() {
    void* p =
        mmap(nullptr, sizeof(Device), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) Device();
  }

  // A write carrying `fence` is accepted only if no newer holder has
  // written yet (equal = the same holder writing again). Lock-free CAS,
  // as a device register with a compare would do.
  bool write(uint64_t fence) {
    uint64_t cur = max_fence.load();
    while (fence >= cur) {
      if (max_fence.compare_exchange_weak(cur, fence)) {
        writes_accepted.fetch_add(1);
        return true;
      }
    }
    stale_rejected.fetch_add(1);
    return false;
  }

  // Called on grant: counts an overlap if any other worker still believes
  // it holds the lock. Publish first, then look: of two racing grants at
  // least one sees the other.
  void begin(int worker, uint64_t fence, int64_t valid_until) {
    beliefs[worker].fence.store(fence);
    beliefs[worker].valid_until.store(valid_until);
    const int64_t now = mono_ns();
    for (int i = 0; i < kMaxWorkers; ++i) {
      if (i != worker && beliefs[i].valid_until.load() > now) overlaps.fetch_add(1);
    }
  }
  void renewed(int worker, int64_t valid_until) { beliefs[worker].valid_until.store(valid_until); }
  void end(int worker) { beliefs[worker].valid_until.store(0); }

  // Copies every worker's grant count (when a wait starts).
  void snapshot(int* out) const {
    for (int i = 0; i < kMaxWorkers; ++i) out[i] = grants_of[i].load();
  }
  // At `worker`'s grant after a wait that began at `before`.
  void note_passes(int worker, const int* before) {
    int most = 0;
    for (int i = 0; i < kMaxWorkers; ++i) {
      const int n = i == worker ? 0 : grants_of[i].load() - before[i];
      most = n > most ? n : most;
    }
    if (most >= 2) passed_twice.fetch_add(1);
    int seen = most_passes.load();
    while (most > seen && !most_passes.compare_exchange_weak(seen, most)) {
    }
    grants_of[worker].fetch_add(1);
  }

  void record_wait(int64_t us) {
    const int i = n_waits.fetch_add(1);
    if (i < kMaxWaits) waits_us[i] = us;
  }
};

}  // namespace demo
