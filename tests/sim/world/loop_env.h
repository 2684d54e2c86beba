#pragma once
// A simulated process's poll loop (private to tests/sim/world): what an
// application on the non-blocking face does (docs/nonblocking.md). It waits
// on the handle's wait_fds() and next_deadline() through sim_poll() and
// calls step(); nothing blocks but the poll.

#include <string>

#include "edgelock/quorum_lock.h"
#include "world/workload_env.h"

namespace edgelock {
namespace sim {

/// How many polls in a row without time moving make a busy loop (a real
/// process would burn a core): as the scheduler's own spin limit.
constexpr int kLoopSpinLimit = 20000;

/// The client-clock deadline at true time `t`.
inline Deadline deadline_at(Env& e, int64_t t) {
  return Deadline::at(TimePoint(Nanos(e.w().client(e.id()).clock.local(t))));
}

/// One turn's wait: the handle's descriptors and deadline, and `also`.
template <typename H>
void loop_wait(Env& e, const H& h, Deadline also) {
  pollfd fds[kMaxWaitFds];
  const size_t n = h.wait_fds(fds, kMaxWaitFds);
  sim_poll(e.w(), e.id(), fds, n, h.next_deadline().min(also));
}

/// Runs an operation started with start_*() (its first status `s`) to its
/// end: poll, step, until step() says anything but kInProgress. With
/// `cancel_at` >= 0 (true time) the loop gives it up there (cancel()) and
/// sets *cancelled; the status is then kTimeout, as a cancelled blocking
/// call's would be.
template <typename H>
Status drive(Env& e, H& h, Status s, int64_t cancel_at = -1, bool* cancelled = nullptr) {
  const Deadline cancel = cancel_at >= 0 ? deadline_at(e, cancel_at) : Deadline::never();
  int64_t last = -1;
  int still = 0;
  for (int turn = 0; turn < 2000000 && s.code() == ErrorCode::kInProgress; ++turn) {
    loop_wait(e, h, cancel);
    if (cancel.expired(e.clock())) {
      e.gave_up_at = e.w().now();
      h.cancel();
      if (cancelled) *cancelled = true;
      return ErrorCode::kTimeout;
    }
    s = h.step();
    still = e.w().now() == last ? still + 1 : 0;
    last = e.w().now();
    if (still > kLoopSpinLimit) {
      e.checker().violation("spin", "c%d: step() kInProgress %d times without time moving", e.id(),
                            still);
      h.cancel();
      return ErrorCode::kTimeout;
    }
  }
  return s;
}

/// Before the process ends: a request given up on may still run after the
/// release that followed it (the release went on a new connection) and
/// leave a key behind until its TTL: the run ends with no key left. A late
/// permit keeps a semaphore's key, whose TTL another holder's extend (up to
/// 2 TTL asked) may re-arm meanwhile: 4 TTL covers both.
inline void settle(Env& e) {
  if (e.gave_up_at < 0) return;
  const int64_t gone = e.gave_up_at + 4 * e.ttl_ns() + e.w().config().command_timeout_ms * kWorkMs;
  if (e.w().now() < gone) e.sleep(gone - e.w().now());
}

/// When to give an acquire up from the loop (true time), or -1: a share of
/// a poll loop's acquires are cancelled at a random instant.
inline int64_t pick_cancel(Env& e) {
  if (!e.rng().chance(0.2)) return -1;
  return e.w().now() + e.rng().log_uniform(kWorkMs / 100, 2 * e.ttl_ns());
}

/// The key of this cycle: a client uses 2-3 keys of its primitive (the
/// first is shared with every workload of that primitive, so they contend).
inline std::string pick_key(Env& e, const char* base, int keys) {
  const int i = static_cast<int>(e.rng().uniform(0, keys - 1));
  return i == 0 ? std::string(base) : std::string(base) + std::to_string(i);
}

/// The QuorumLock options of every quorum workload (workloads.cc).
QuorumOptions quorum_options(Env& e);

void run_lock_loop(Env& e);
void run_quorum_loop(Env& e);
void run_semaphore_loop(Env& e);
void run_reentrant_loop(Env& e);
void run_semaphore_keeper(Env& e);
void run_reentrant_keeper(Env& e);

}  // namespace sim
}  // namespace edgelock
