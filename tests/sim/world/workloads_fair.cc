// The FairLock workload: clients queue for one key ("F"), wait (queue
// join, BLPOP on their own wake list with the next attempt pipelined
// behind it, renewals of their place, dead waiters dropped), hold, extend
// and release. Some waiters die mid-wait (the process is gone: its sockets
// close, it never leaves the queue, it starts again) and some freeze
// (SIGSTOP) for longer than their waiter timeout, so the queue must step
// over them.
#include "edgelock/fair_lock.h"
#include "world/workload_env.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = kWorkMs;

FairLockOptions fair_options(Env& e) {
  FairLockOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.drift_factor = e.w().config().drift_factor;
  const int64_t waiter_timeouts[] = {500, 1000, 2000};
  o.waiter_timeout = Millis(e.rng().pick(waiter_timeouts));
  return o;
}

// Before a wait: maybe the process dies during it (a finite wait then: a
// dead process's acquire must still return for it to start again), or
// freezes for longer than its waiter timeout. Only while faults run, so
// the calm phase sees neither.
Nanos plan_fate(Env& e, const FairLockOptions& o, Nanos wait) {
  World& w = e.w();
  if (w.calm() || wait == Nanos(0)) return wait;
  if (e.rng().chance(0.05)) {
    if (wait < Nanos(0) || wait == kForever) wait = Nanos(6 * e.ttl_ns());
    w.client(e.id()).dies_at = w.now() + e.rng().log_uniform(kMs, wait.count());
    return wait;
  }
  if (e.rng().chance(0.05)) {
    const int64_t start = w.now() + e.rng().log_uniform(kMs, e.ttl_ns());
    const int64_t wt = Nanos(o.waiter_timeout).count();
    const int64_t end = start + wt + e.rng().log_uniform(kMs, 2 * wt);
    if (end < w.calm_at()) {
      ++w.stats().waiter_freezes;
      w.freeze(e.id(), start, end);
    }
  }
  return wait;
}

// Holds a grant, then releases it.
void use_grant(Env& e, FairLock& lock, const LeaseRef& ref, Status s) {
  ++e.w().stats().grants;
  e.checker().granted(e.id(), "F", lock.fence(), ref.token);
  report(e, lock, ref);
  after_ok(e, lock, s, "acquire");
  hold(e, lock, ref);
}

// One life of a FairLock process; true if it died mid-wait (no release,
// no leave: its place lapses after its waiter timeout).
bool fair_life(Env& e) {
  FairLock lock(e.conn());
  const FairLockOptions o = fair_options(e);
  if (!lock.init(Bytes::from_cstr("F"), o).ok()) return false;
  e.checker().set_retry_min(e.id(), o.retry_min.count());
  e.checker().set_wait_slack("F", Nanos(o.waiter_timeout).count());
  ClientProc& self = e.w().client(e.id());
  int64_t start = -1;  // a kept place: the cycle that joined
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    if (start < 0) start = e.w().now();
    const Nanos wait = plan_fate(e, o, e.pick_wait());
    const GiveUp give_up = e.rng().chance(0.15) ? GiveUp::kStay : GiveUp::kLeave;
    e.checker().waiting(e.id(), "F", true);
    const Status s =
        wait == Nanos(0) && !lock.queued() ? lock.try_acquire() : lock.acquire(wait, give_up);
    e.checker().waiting(e.id(), "F", false);
    self.dies_at = -1;
    if (self.dead) return true;
    const LeaseRef ref = lock_ref(LeaseKind::kLock, "F", lock.token());
    if (s.ok()) use_grant(e, lock, ref, s);
    // A place kept after a busy wait: the next cycle goes on from it.
    if (!s.ok() && s.code() == ErrorCode::kBusy && lock.queued() && !e.rng().chance(0.3)) continue;
    release_all(e, lock, ref, start);
    start = -1;
  }
  if (lock.queued()) release_all(e, lock, lock_ref(LeaseKind::kLock, "F", lock.token()), start);
  return false;
}

}  // namespace

void run_fair(Env& e) {
  for (int life = 0; life < 1000 && fair_life(e); ++life) {
    ClientProc& self = e.w().client(e.id());
    ++e.w().stats().waiter_crashes;
    e.w().trace("c%d starts again after dying mid-wait", e.id());
    self.dead = false;
    if (!e.restart()) return;
  }
}

}  // namespace sim
}  // namespace edgelock
