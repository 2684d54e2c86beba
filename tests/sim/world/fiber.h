#pragma once
// Fibers: each simulated client process runs the real library code on its
// own stack, and hands control back to the scheduler whenever the library
// would block (a transport wait, a sleep). Only one fiber or the scheduler
// runs at any moment, switched explicitly (ucontext), so the whole world is
// one thread and every run is deterministic.

#include <ucontext.h>

#include <cstddef>
#include <vector>

namespace edgelock {
namespace sim {

class Fiber {
 public:
  using Body = void (*)(void* arg);

  explicit Fiber(size_t stack_bytes = 256 * 1024);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  /// Prepares the fiber to run body(arg) from its start on the next resume().
  void start(Body body, void* arg);
  /// Scheduler side: runs the fiber until it yields or its body returns.
  void resume();
  /// Fiber side: back to the scheduler; returns when resumed.
  void yield();
  bool finished() const { return finished_; }
  bool running() const { return running_; }
  /// The fiber running now, or nullptr in the scheduler.
  static Fiber* current();

 private:
  static void trampoline(unsigned lo, unsigned hi);

  std::vector<char> stack_;
  ucontext_t ctx_{};
  ucontext_t caller_{};
  Body body_ = nullptr;
  void* arg_ = nullptr;
  bool finished_ = true;
  bool running_ = false;
};

}  // namespace sim
}  // namespace edgelock
