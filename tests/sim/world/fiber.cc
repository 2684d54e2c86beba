#include "world/fiber.h"

#include <cstdint>

#include "model/fail.h"

namespace edgelock {
namespace sim {

namespace {
Fiber* g_current = nullptr;
}  // namespace

Fiber::Fiber(size_t stack_bytes) : stack_(stack_bytes) {}

Fiber::~Fiber() = default;

Fiber* Fiber::current() { return g_current; }

void Fiber::trampoline(unsigned lo, unsigned hi) {
  // makecontext passes ints: the pointer comes in two halves.
  const uintptr_t p = (static_cast<uintptr_t>(hi) << 16 << 16) | static_cast<uintptr_t>(lo);
  Fiber* f = reinterpret_cast<Fiber*>(p);
  f->body_(f->arg_);
  f->finished_ = true;
  // Returning ends the context; uc_link resumes the scheduler.
}

void Fiber::start(Body body, void* arg) {
  if (running_) model_fail("fiber restarted while running");
  body_ = body;
  arg_ = arg;
  finished_ = false;
  if (getcontext(&ctx_) != 0) model_fail("getcontext failed");
  ctx_.uc_stack.ss_sp = stack_.data();
  ctx_.uc_stack.ss_size = stack_.size();
  ctx_.uc_link = &caller_;
  const uintptr_t p = reinterpret_cast<uintptr_t>(this);
  makecontext(&ctx_, reinterpret_cast<void (*)()>(&Fiber::trampoline), 2,
              static_cast<unsigned>(p & 0xffffffffu), static_cast<unsigned>((p >> 16) >> 16));
}

void Fiber::resume() {
  if (finished_ || g_current) model_fail("fiber resumed when not runnable");
  g_current = this;
  running_ = true;
  if (swapcontext(&caller_, &ctx_) != 0) model_fail("swapcontext failed");
  running_ = false;
  g_current = nullptr;
}

void Fiber::yield() {
  if (g_current != this) model_fail("fiber yield from outside it");
  if (swapcontext(&ctx_, &caller_) != 0) model_fail("swapcontext failed");
}

}  // namespace sim
}  // namespace edgelock
