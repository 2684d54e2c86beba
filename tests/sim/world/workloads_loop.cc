// Workloads on the non-blocking face, each from a simulated poll loop:
// start_acquire / start_extend / start_renew / start_release driven by
// step(), and cancel() in the middle of an acquire (also of an extend or a
// release). Lock and QuorumLock share one template; Semaphore permits and
// ReentrantLock have their own. A client uses 2-3 keys of its primitive.
#include "edgelock/quorum_lock.h"
#include "edgelock/reentrant_lock.h"
#include "edgelock/semaphore.h"
#include "world/loop_env.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = kWorkMs;

int pick_keys(Env& e) { return static_cast<int>(e.rng().uniform(2, 3)); }

// A share of renewals and releases is given up from the loop too.
int64_t pick_late_cancel(Env& e) {
  return e.rng().chance(0.1) ? e.w().now() + e.rng().log_uniform(kMs / 100, e.ttl_ns()) : -1;
}

// An acquire from the loop (`lease` gives remaining(), `h` is stepped).
// After a cancel() nothing is held: the library claims no grant it did not
// check.
template <typename L, typename H, typename F>
Status loop_acquire(Env& e, const L& lease, H& h, const std::string& key, F start) {
  const Nanos wait = e.pick_wait();
  const int64_t cancel_at = pick_cancel(e);
  // An acquire the loop gives up on is no waiter the liveness bound covers.
  if (cancel_at < 0) e.checker().waiting(e.id(), key, true);
  bool cancelled = false;
  const Status s = drive(e, h, start(wait), cancel_at, &cancelled);
  if (cancel_at < 0) e.checker().waiting(e.id(), key, false);
  if (cancelled && lease.remaining() > Nanos::zero()) {
    e.checker().violation("contract", "c%d: held after cancel() of its acquire", e.id());
  }
  return s;
}

// A renewal from the loop, timed against the validity it started with; a
// cancelled one leaves the lesser validity (remaining() says).
template <typename L, typename F>
void loop_renewal(Env& e, L& lease, Millis ttl, F start) {
  may_shorten(e, ttl);
  const int64_t cancel_at = pick_late_cancel(e);
  bool cancelled = false;
  const Status s =
      renewal(e, lease, [&] { return drive(e, lease, start(), cancel_at, &cancelled); });
  if (!cancelled) after_ok(e, lease, s, "extend");
}

template <typename L>
void loop_hold(Env& e, L& lock, const LeaseRef& ref) {
  const int steps = static_cast<int>(e.rng().uniform(0, 3));
  for (int i = 0; i <= steps; ++i) {
    e.sleep(e.pick_hold());
    report(e, lock, ref);
    if (i == steps) break;
    if (e.rng().chance(0.5)) {
      const Millis ttl(e.rng().log_uniform(1, 3 * e.w().config().ttl_ms));
      const ExtendMode mode = e.rng().chance(0.5) ? ExtendMode::kAdd : ExtendMode::kReplace;
      loop_renewal(e, lock, ttl, [&] { return lock.start_extend(ttl, mode); });
    } else {
      loop_renewal(e, lock, Millis(e.w().config().ttl_ms), [&] { return lock.start_renew(); });
    }
    report(e, lock, ref);
  }
}

// Releases from the loop, again after an unknown outcome; the last try is
// never cancelled.
template <typename L>
void loop_release(Env& e, L& lock, const LeaseRef& ref, int64_t op_start) {
  e.checker().unclaim(e.id(), 0);
  for (int i = 0; i < 3; ++i) {
    bool cancelled = false;
    const int64_t cancel_at = i < 2 ? pick_late_cancel(e) : -1;
    const Status s = drive(e, lock, lock.start_release(), cancel_at, &cancelled);
    after_release(e, lock);
    if (!cancelled &&
        (s.ok() || s.code() == ErrorCode::kNotHeld || s.code() == ErrorCode::kNotOwner)) {
      break;
    }
    e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
  }
  if (!ref.token.empty()) e.checker().must_clean(e.id(), ref, op_start);
}

// One acquire-hold-release cycle of a Lock or QuorumLock from the loop.
template <typename L>
void loop_cycle(Env& e, L& lock, LeaseKind kind, const std::string& key) {
  const int64_t start = e.w().now();
  const Status s = loop_acquire(e, lock, lock, key, [&](Nanos wait) {
    return wait == Nanos(0) ? lock.start_try_acquire() : lock.start_acquire(wait);
  });
  const LeaseRef ref = lock_ref(kind, key.c_str(), lock.token());
  if (s.ok()) {
    ++e.w().stats().grants;
    e.checker().granted(e.id(), key, lock.fence(), ref.token);
    report(e, lock, ref);
    after_ok(e, lock, s, "acquire");
    loop_hold(e, lock, ref);
  }
  loop_release(e, lock, ref, start);
}

}  // namespace

void run_lock_loop(Env& e) {
  const int keys = pick_keys(e);
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const std::string key = pick_key(e, "L", keys);
    Lock lock(e.conn());
    LockOptions o;
    o.ttl = Millis(e.w().config().ttl_ms);
    o.drift_factor = e.w().config().drift_factor;
    o.wake_on_release = e.w().config().wake_on_release;
    if (!lock.init(Bytes::from_cstr(key.c_str()), o).ok()) return;
    e.checker().set_retry_min(e.id(), o.retry_min.count());
    loop_cycle(e, lock, LeaseKind::kLock, key);
  }
  settle(e);
}

void run_quorum_loop(Env& e) {
  QuorumLock lock;
  if (!lock.init(e.conn_array(), e.w().server_count(), Bytes::from_cstr("Q"), quorum_options(e))
           .ok()) {
    return;
  }
  e.checker().set_retry_min(e.id(), Millis(2).count());
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    loop_cycle(e, lock, LeaseKind::kQuorum, "Q");
  }
  settle(e);
}

namespace {

void permit_hold(Env& e, Permit& p, const LeaseRef& ref) {
  const int steps = static_cast<int>(e.rng().uniform(0, 2));
  for (int i = 0; i <= steps; ++i) {
    e.sleep(e.pick_hold());
    report(e, p, ref);
    if (i == steps) break;
    const Millis ttl(e.rng().log_uniform(1, 3 * e.w().config().ttl_ms));
    if (e.rng().chance(0.5)) {
      loop_renewal(e, p, ttl, [&] { return p.start_extend(ttl); });
    } else {
      loop_renewal(e, p, Millis(e.w().config().ttl_ms), [&] { return p.start_renew(); });
    }
    report(e, p, ref);
  }
}

void permit_release(Env& e, Permit& p, const LeaseRef& ref, int64_t start) {
  e.checker().unclaim(e.id(), 0);
  for (int i = 0; i < 3 && !p.token().empty(); ++i) {
    bool cancelled = false;
    const int64_t cancel_at = i < 2 ? pick_late_cancel(e) : -1;
    const Status r = drive(e, p, p.start_release(), cancel_at, &cancelled);
    if (!cancelled &&
        (r.ok() || r.code() == ErrorCode::kNotOwner || r.code() == ErrorCode::kNotHeld ||
         r.code() == ErrorCode::kInvalidArgument)) {
      break;
    }
    e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
  }
  if (!ref.token.empty()) e.checker().must_clean(e.id(), ref, start);
}

}  // namespace

void run_semaphore_loop(Env& e) {
  const int keys = pick_keys(e);
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const std::string key = pick_key(e, "S", keys);
    Semaphore sem(e.conn());
    SemaphoreOptions o;
    o.ttl = Millis(e.w().config().ttl_ms);
    o.permits = static_cast<uint32_t>(e.w().config().permits);
    o.drift_factor = e.w().config().drift_factor;
    if (!sem.init(Bytes::from_cstr(key.c_str()), o).ok()) return;
    e.checker().set_retry_min(e.id(), o.retry_min.count());
    const int64_t start = e.w().now();
    Permit p;
    const Status s = loop_acquire(e, p, sem, key, [&](Nanos wait) {
      return wait == Nanos(0) ? sem.start_try_acquire(&p) : sem.start_acquire(&p, wait);
    });
    const LeaseRef ref = lock_ref(LeaseKind::kPermit, key.c_str(), p.token());
    if (s.ok()) {
      ++e.w().stats().grants;
      after_ok(e, p, s, "acquire");
      report(e, p, ref);
      permit_hold(e, p, ref);
    }
    permit_release(e, p, ref, start);
  }
  settle(e);
}

}  // namespace sim
}  // namespace edgelock
