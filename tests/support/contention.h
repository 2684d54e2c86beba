#pragma once
// The contention harness of the mutual-exclusion tests: worker processes
// that take one lock in turn and write its fence to a shared
// FencedResource (overlap detector, stale-fence check), and the checks
// every such run makes.

#include <functional>

#include "edgelock/clock.h"
#include "fenced_resource.h"
#include "redis_server.h"

namespace edgelock {
namespace test {

/// A worker's exit codes (0 is a clean run).
constexpr int kWorkerSetupFailed = 10;
constexpr int kWorkerInitFailed = 11;
constexpr int kWorkerAcquireFailed = 12;

/// One worker's loop on an initialised lock (Lock, QuorumLock): `grants`
/// times acquire (30 s, scaled), count the grant, enter the critical section,
/// write the fence, hold 1 ms every 16th time, leave, release. A failed
/// release or a refused fence counts in dev->errors; a failed acquire ends
/// the loop with kWorkerAcquireFailed.
template <class L>
int contend(L& lock, int grants, FencedResource* dev) {
  for (int i = 0; i < grants; ++i) {
    if (!lock.acquire(Millis(30000) * slowdown()).ok()) {
      dev->errors.fetch_add(1);
      return kWorkerAcquireFailed;
    }
    dev->grants.fetch_add(1);
    const bool alone = dev->enter();
    if (!dev->write(lock.fence())) dev->errors.fetch_add(1);
    if (i % 16 == 0) SystemClock().sleep_for(Millis(1));  // hold a little, sometimes
    if (alone) dev->leave();
    if (!lock.release().ok()) dev->errors.fetch_add(1);
  }
  return 0;
}

/// Forks `workers` processes, process w exiting with work(w), and waits for
/// every one; each must exit 0.
void run_processes(int workers, const std::function<int(int)>& work);

/// After `grants` grants in all: every one counted, no two holders inside
/// at once, no fence refused, no error.
void expect_exclusive(const FencedResource& dev, int grants);

}  // namespace test
}  // namespace edgelock
