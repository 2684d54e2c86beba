#pragma once
// Soak test: the history every process records in shared memory,
// the fenced resource the lock guards, and the checker that reads the
// history afterwards. Times are CLOCK_MONOTONIC nanoseconds, which is one
// time line for every process on the host.

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace edgelock {
namespace soak {

/// One grant as its holder saw it.
struct Grant {
  int32_t proc = 0;
  uint64_t fence = 0;
  int64_t granted = 0;      ///< acquire() returned ok
  int64_t valid_until = 0;  ///< granted + the lock's remaining() at that moment
  int64_t released = 0;     ///< release() was called (0 = never)
};

/// One write attempt on the resource, in the order the resource saw them.
struct Write {
  int32_t proc = 0;
  uint64_t fence = 0;
  int64_t at = 0;
  bool accepted = false;
};

struct Shared {
  // Settings, fixed before the fork.
  size_t max_grants = 0;
  size_t max_writes = 0;
  bool ignore_fence = false;  ///< unsafe control: the resource accepts any fence
  // Progress.
  std::atomic<uint64_t> grants{0};
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> overruns{0};      ///< calls that overran their deadline
  std::atomic<int64_t> slowest_ns{0};     ///< slowest lock call
  std::atomic<int64_t> worst_over_ns{0};  ///< largest overrun past a budget
  std::atomic<int> worst_over_kind{-1};   ///< its call: 0 acquire, 1 release
  std::atomic<uint64_t> errors{0};        ///< failed acquires (faults) - not violations
  /// Times the driver SIGSTOPped each worker: a call that spans a stop is
  /// not held to its deadline (the process was not running).
  std::atomic<uint32_t> stops[64];
  // The guarded resource (process-shared mutex).
  pthread_mutex_t mu;
  uint64_t highest_fence = 0;
  int64_t value = 0;
  int64_t accepted_commits = 0;
  uint64_t rejected = 0;
  Grant* grant_log = nullptr;
  Write* write_log = nullptr;
};

/// Maps the shared block for `max_grants` grants. nullptr on failure.
Shared* create_shared(size_t max_grants, bool ignore_fence);

/// Resource: read the value under `fence`. False if the fence is stale.
/// Registering the fence on reads too is what stops a late writer from
/// slipping in between a newer holder's read and write.
bool resource_begin(Shared& s, int proc, uint64_t fence, int64_t* value);
/// Resource: store `value` under `fence`. False if the fence is stale.
bool resource_commit(Shared& s, int proc, uint64_t fence, int64_t value, int64_t now);
/// Reserves a grant slot; nullptr when the run has enough grants.
Grant* record_grant(Shared& s);
/// Notes a lock call's duration against its budget (kind: 0 acquire, 1 release).
void record_call(Shared& s, int kind, int64_t took_ns, int64_t budget_ns);

struct Verdict {
  uint64_t grants = 0;
  uint64_t overlaps = 0;  ///< validity windows of two holders overlapped
  uint64_t stale_accepted = 0;
  uint64_t lost_updates = 0;  ///< |value - accepted commits|
  uint64_t overruns = 0;
  uint64_t rejected = 0;  ///< stale writes the resource refused (fine)
  uint64_t violations() const { return overlaps + stale_accepted + lost_updates + overruns; }
};

/// Reads the whole history and counts violations.
Verdict check_history(const Shared& s);

}  // namespace soak
}  // namespace edgelock
