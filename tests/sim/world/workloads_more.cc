// Workloads of the semaphore, the reentrant lock and the rate limiter.
#include "edgelock/rate_limiter.h"
#include "edgelock/reentrant_lock.h"
#include "edgelock/semaphore.h"
#include "world/workload_env.h"

namespace edgelock {
namespace sim {

namespace {
constexpr int64_t kMs = kWorkMs;
}  // namespace

void run_semaphore(Env& e) {
  Semaphore sem(e.conn());
  SemaphoreOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.permits = static_cast<uint32_t>(e.w().config().permits);
  o.drift_factor = e.w().config().drift_factor;
  if (!sem.init(Bytes::from_cstr("S"), o).ok()) return;
  e.checker().set_retry_min(e.id(), o.retry_min.count());
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const int64_t start = e.w().now();
    Permit p;
    const Nanos wait = e.pick_wait();
    e.checker().waiting(e.id(), "S", true);
    const Status s = wait == Nanos(0) ? sem.try_acquire(&p) : sem.acquire(&p, wait);
    e.checker().waiting(e.id(), "S", false);
    const LeaseRef ref = lock_ref(LeaseKind::kPermit, "S", p.token());
    if (s.ok()) {
      ++e.w().stats().grants;
      after_ok(e, p, s, "acquire");
      report(e, p, ref);
      const int steps = static_cast<int>(e.rng().uniform(0, 2));
      for (int i = 0; i <= steps; ++i) {
        e.sleep(e.pick_hold());
        report(e, p, ref);
        if (i < steps) {
          const Millis ttl(e.rng().log_uniform(1, 3 * e.w().config().ttl_ms));
          may_shorten(e, ttl);
          after_ok(e, p, renewal(e, p, [&] { return p.extend(ttl); }), "extend");
        }
        report(e, p, ref);
      }
    }
    e.checker().unclaim(e.id(), 0);
    for (int i = 0; i < 3 && !p.token().empty(); ++i) {
      // (A permit whose release was refused before it ran is still held:
      // semaphore.h. Only Lock and QuorumLock promise held() false.)
      const Status r = p.release();
      if (r.ok() || r.code() == ErrorCode::kNotOwner || r.code() == ErrorCode::kNotHeld ||
          r.code() == ErrorCode::kInvalidArgument) {
        break;
      }
      e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
    }
    if (!ref.token.empty()) e.checker().must_clean(e.id(), ref, start);
  }
}

namespace {

// A second level on a held reentrant lock: hold, maybe extend, release it.
void reenter(Env& e, ReentrantLock& lock, const LeaseRef& ref) {
  // The same fence, one more level.
  const Status again = lock.acquire(Nanos(0));
  report(e, lock, ref);
  e.sleep(e.pick_hold());
  report(e, lock, ref);
  if (e.rng().chance(0.3)) {
    const Millis ttl(e.rng().log_uniform(1, 2 * e.w().config().ttl_ms));
    may_shorten(e, ttl);
    after_ok(e, lock, renewal(e, lock, [&] { return lock.extend(ttl); }), "extend");
  }
  report(e, lock, ref);
  if (again.ok() && lock.depth() > 1) {
    may_shorten(e, Millis(e.w().config().ttl_ms));  // the release re-arms the TTL
    lock.release().ignore();
    report(e, lock, ref);
  }
}

// Every level, also those whose validity ran out or whose outcome is
// unknown (depth() no longer counts them): until there is nothing left.
void release_levels(Env& e, ReentrantLock& lock) {
  e.checker().unclaim(e.id(), 0);
  for (int i = 0; i < 6; ++i) {
    const Status r = lock.release();
    if (r.code() == ErrorCode::kNotHeld) break;
    if (!r.ok()) e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
  }
}

}  // namespace

void run_reentrant(Env& e) {
  ReentrantLock lock(e.conn());
  ReentrantLockOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.drift_factor = e.w().config().drift_factor;
  if (!lock.init(Bytes::from_cstr("R"), o).ok()) return;
  e.checker().set_retry_min(e.id(), o.retry_min.count());
  LeaseRef ref;
  ref.kind = LeaseKind::kReentrant;
  ref.key = "R";
  ref.token.assign(reinterpret_cast<const char*>(lock.owner().data), lock.owner().size);
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const Nanos wait = e.pick_wait();
    // Levels left from a cycle whose releases failed make this a re-entry
    // (same fence): only a first level is a new grant.
    const bool fresh = lock.depth() == 0;
    e.checker().waiting(e.id(), "R", true);
    Status s = wait == Nanos(0) ? lock.try_acquire() : lock.acquire(wait);
    e.checker().waiting(e.id(), "R", false);
    if (s.ok()) {
      ++e.w().stats().grants;
      // Each grant from depth 0 has its own nonce (docs/late-requests.md).
      ref.handle.assign(reinterpret_cast<const char*>(lock.handle().data), lock.handle().size);
      if (fresh) e.checker().granted(e.id(), "R", lock.fence(), ref.token);
      after_ok(e, lock, s, "acquire");
      report(e, lock, ref);
      e.sleep(e.pick_hold());
      report(e, lock, ref);
      if (e.rng().chance(0.5)) reenter(e, lock, ref);
    }
    release_levels(e, lock);
  }
  for (int i = 0; i < 8 && lock.release().code() != ErrorCode::kNotHeld; ++i) {
  }
}

void run_rate(Env& e, int64_t limit, const char* key) {
  RateLimiter limiter(e.conn());
  RateLimiterOptions o;
  o.window = Millis(e.w().config().period_ms);
  o.limit = limit;
  if (!limiter.init(Bytes::from_cstr(key), o).ok()) return;
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const Nanos wait = e.pick_wait();
    const Nanos w = wait == kForever ? Nanos(3 * o.window) : wait;
    e.checker().waiting(e.id(), key, true);
    const Status s = w == Nanos(0) ? limiter.try_acquire() : limiter.acquire(w);
    e.checker().waiting(e.id(), key, false);
    if (s.ok()) {
      ++e.w().stats().grants;
      e.checker().admitted(e.id(), key);
    }
  }
}

}  // namespace sim
}  // namespace edgelock
