#include "world/workloads.h"

#include "edgelock/quorum_lock.h"
#include "world/loop_env.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = kWorkMs;

void run_lock(Env& e, bool with_keeper) {
  Lock lock(e.conn());
  LockOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.drift_factor = e.w().config().drift_factor;
  o.wake_on_release = e.w().config().wake_on_release;
  if (!lock.init(Bytes::from_cstr("L"), o).ok()) return;
  e.checker().set_retry_min(e.id(), o.retry_min.count());
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const int64_t start = e.w().now();
    const Nanos wait = e.pick_wait();
    e.checker().waiting(e.id(), "L", true);
    const Status s = wait == Nanos(0) ? lock.try_acquire() : lock.acquire(wait);
    e.checker().waiting(e.id(), "L", false);
    const LeaseRef ref = lock_ref(LeaseKind::kLock, "L", lock.token());
    if (s.ok()) {
      ++e.w().stats().grants;
      e.checker().granted(e.id(), "L", lock.fence(), ref.token);
      report(e, lock, ref);
      after_ok(e, lock, s, "acquire");
      if (with_keeper) {
        LeaseKeeper keeper(lock);
        keep(e, lock, ref, keeper);
      } else {
        hold(e, lock, ref);
      }
    }
    release_all(e, lock, ref, start);
  }
  settle(e);
}

}  // namespace

QuorumOptions quorum_options(Env& e) {
  QuorumOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.drift_factor = e.w().config().drift_factor;
  // The default round budget (TTL / 50, at least 5 ms) must also hold a
  // reconnect's handshake; with a few ms per round trip it cannot
  // (docs/simulation.md, findings): use the command budget, below the TTL.
  const int64_t budget = std::min(e.w().config().command_timeout_ms, e.w().config().ttl_ms / 2);
  o.server_timeout = Millis(budget);
  return o;
}

namespace {

// One life of a QuorumLock process; true if it crashed right after a
// grant (no release: its keys are left to expire). The next life starts
// with a fresh lock that has seen no fence, so the one-round fencing must
// still give it a higher fence than the crashed holder's.
bool quorum_life(Env& e, bool with_keeper) {
  QuorumLock lock;
  if (!lock.init(e.conn_array(), e.w().server_count(), Bytes::from_cstr("Q"), quorum_options(e))
           .ok()) {
    return false;
  }
  e.checker().set_retry_min(e.id(), Millis(2).count());
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const int64_t start = e.w().now();
    const Nanos wait = e.pick_wait();
    e.checker().waiting(e.id(), "Q", true);
    const Status s = wait == Nanos(0) ? lock.try_acquire() : lock.acquire(wait);
    e.checker().waiting(e.id(), "Q", false);
    const LeaseRef ref = lock_ref(LeaseKind::kQuorum, "Q", lock.token());
    if (s.ok()) {
      ++e.w().stats().grants;
      e.checker().granted(e.id(), "Q", lock.fence(), ref.token);
      report(e, lock, ref);
      after_ok(e, lock, s, "acquire");
      if (e.rng().chance(0.03)) {
        e.checker().unclaim(e.id(), 0);
        e.w().trace("c%d crashed holding Q (fence %llu)", e.id(),
                    static_cast<unsigned long long>(lock.fence()));
        return true;
      }
      if (with_keeper) {
        LeaseKeeper keeper(lock);
        keep(e, lock, ref, keeper);
      } else {
        hold(e, lock, ref);
      }
    }
    release_all(e, lock, ref, start);
  }
  return false;
}

void run_quorum(Env& e, bool with_keeper) {
  int64_t crashed_at = -1;
  for (int life = 0; life < 1000 && quorum_life(e, with_keeper); ++life) {
    ++e.w().stats().holder_crashes;
    crashed_at = e.w().now();
    if (!e.restart()) return;
  }
  // The run ends with no key left: a crashed holder's keys must expire first.
  const int64_t gone = crashed_at + 2 * e.ttl_ns();
  if (crashed_at >= 0 && e.w().now() < gone) e.sleep(gone - e.w().now());
  settle(e);
}

}  // namespace

void client_main(World& w, int client) {
  Env e(w, client);
  if (!e.setup()) return;
  switch (w.config().work[static_cast<size_t>(client)]) {
    case Work::kLock: run_lock(e, false); break;
    case Work::kLockKeeper: run_lock(e, true); break;
    case Work::kQuorum: run_quorum(e, false); break;
    case Work::kQuorumKeeper: run_quorum(e, true); break;
    case Work::kSemaphore: run_semaphore(e); break;
    case Work::kReentrant: run_reentrant(e); break;
    case Work::kCooldown: run_rate(e, 1, "C"); break;
    case Work::kQuota: run_rate(e, e.w().config().quota_max, "QT"); break;
    case Work::kFair: run_fair(e); break;
    case Work::kLockLoop: run_lock_loop(e); break;
    case Work::kQuorumLoop: run_quorum_loop(e); break;
    case Work::kSemaphoreLoop: run_semaphore_loop(e); break;
    case Work::kReentrantLoop: run_reentrant_loop(e); break;
    case Work::kSemaphoreKeeper: run_semaphore_keeper(e); break;
    case Work::kReentrantKeeper: run_reentrant_keeper(e); break;
  }
}

}  // namespace sim
}  // namespace edgelock
