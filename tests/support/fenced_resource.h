#pragma once
// A shared "device" for multi-process tests: lives in shared memory, counts
// holders inside the critical section (overlap detector) and accepts a
// write only if its fencing token is higher than any accepted before.

#include <sys/mman.h>

#include <atomic>
#include <cstdint>

namespace edgelock {
namespace test {

struct FencedResource {
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<uint64_t> max_fence{0};
  std::atomic<int> stale_rejected{0};
  std::atomic<int> grants{0};
  std::atomic<int> errors{0};

  /// Enter/leave the critical section; enter() returns false on overlap.
  bool enter() {
    if (inside.fetch_add(1) != 0) {
      overlaps.fetch_add(1);
      return false;
    }
    return true;
  }
  void leave() { inside.fetch_sub(1); }

  /// The device's own check: accept only a fence above every accepted one.
  bool write(uint64_t fence) {
    uint64_t cur = max_fence.load();
    while (fence > cur) {
      if (max_fence.compare_exchange_weak(cur, fence)) return true;
    }
    stale_rejected.fetch_add(1);
    return false;
  }

  static FencedResource* create() {
    void* p = mmap(nullptr, sizeof(FencedResource), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : new (p) FencedResource();
  }
};

}  // namespace test
}  // namespace edgelock
