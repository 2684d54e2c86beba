// A LeaseKeeper on Semaphore permits and on a ReentrantLock (also at depth
// 2, and again after a partial release), in a poll loop that either watches
// the keeper's wait_fds() or honours only next_deadline(). KeeperOptions
// (renew_every, retry_every, lose_before) are drawn per client.
#include "edgelock/reentrant_lock.h"
#include "edgelock/semaphore.h"
#include "world/loop_env.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = kWorkMs;

KeeperOptions pick_keeper_options(Env& e) {
  KeeperOptions o;
  const int64_t ttl = e.ttl_ns();
  if (e.rng().chance(0.3)) o.renew_every = Nanos(e.rng().log_uniform(ttl / 20, ttl / 2));
  if (e.rng().chance(0.3)) o.retry_every = Nanos(e.rng().log_uniform(kMs, ttl / 4));
  if (e.rng().chance(0.6)) o.lose_before = Nanos(e.rng().log_uniform(kMs / 10, ttl / 3));
  return o;
}

// The true instant `before` ahead of the lease's validity end (0: none left).
template <typename L>
int64_t end_of(Env& e, const L& lease, Nanos before) {
  const Nanos left = lease.remaining() - before;
  return left > Nanos::zero() ? e.end_after(left) : 0;
}

// What the keeper said, against the ends it relied on: kKeeping only
// before the keeper's end (lose_before ahead of the validity's), any report
// by the validity's end (a reconnect inside start_renew may block up to
// that end, past the keeper's: docs/simulation.md).
void judge(Env& e, int slot, bool lost, int64_t keeper_end, int64_t valid_end, bool paused) {
  if (!lost && !paused && keeper_end > 0 && e.w().now() >= keeper_end) {
    e.checker().violation("keeper", "c%d's keeper reported keeping %.3f ms after its end", e.id(),
                          static_cast<double>(e.w().now() - keeper_end) / 1e6);
  }
  e.checker().keeper_report(e.id(), slot, lost, valid_end, paused);
}

// Keeps `lease` for a while from the loop; false if the keeper lost it.
template <typename L>
bool keep_loop(Env& e, L& lease, const LeaseRef& ref, int slot, const KeeperOptions& ko,
               bool watch) {
  LeaseKeeper keeper(lease, ko);
  if (!keeper.start().ok()) return true;
  const int64_t stop = e.w().now() + e.rng().log_uniform(e.ttl_ns() / 2, 6 * e.ttl_ns());
  uint32_t pauses = e.pauses();
  int64_t keeper_end = end_of(e, lease, ko.lose_before), valid_end = end_of(e, lease, Nanos(0));
  for (int i = 0; i < 200000 && e.w().now() < stop; ++i) {
    pollfd fds[kMaxWaitFds];
    const size_t n = watch ? keeper.wait_fds(fds, kMaxWaitFds) : 0;
    const Deadline end = deadline_at(e, stop);
    sim_poll(e.w(), e.id(), fds, n, keeper.next_deadline().min(end));
    if (end.expired(e.clock())) break;
    const LeaseState st = keeper.step();
    // A process frozen since it last looked cannot hear of a loss in time.
    const bool paused = e.pauses() != pauses;
    pauses = e.pauses();
    judge(e, slot, st == LeaseState::kLost, keeper_end, valid_end, paused);
    if (st == LeaseState::kLost) {
      e.gave_up_at = e.w().now();  // a renewal out may have been given up
      e.checker().unclaim(e.id(), slot);
      return false;
    }
    report(e, lease, ref, slot);
    keeper_end = end_of(e, lease, ko.lose_before);
    valid_end = end_of(e, lease, Nanos(0));
  }
  if (keeper.renewing()) e.gave_up_at = e.w().now();
  keeper.stop();  // a renewal given up: the lesser validity
  report(e, lease, ref, slot);
  return true;
}

}  // namespace

void run_semaphore_keeper(Env& e) {
  const int keys = static_cast<int>(e.rng().uniform(2, 3));
  const KeeperOptions ko = pick_keeper_options(e);
  const bool watch = e.rng().chance(0.5);
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
    const Nanos wait = e.pick_wait();
    e.checker().waiting(e.id(), key, true);
    const Status s = wait == Nanos(0) ? sem.try_acquire(&p) : sem.acquire(&p, wait);
    e.checker().waiting(e.id(), key, false);
    const LeaseRef ref = lock_ref(LeaseKind::kPermit, key.c_str(), p.token());
    if (s.ok()) {
      ++e.w().stats().grants;
      after_ok(e, p, s, "acquire");
      report(e, p, ref);
      keep_loop(e, p, ref, 0, ko, watch);
    }
    e.checker().unclaim(e.id(), 0);
    for (int i = 0; i < 3 && !p.token().empty(); ++i) {
      const Status r = p.release();
      if (r.ok() || r.code() == ErrorCode::kNotOwner || r.code() == ErrorCode::kNotHeld ||
          r.code() == ErrorCode::kInvalidArgument) {
        break;
      }
      e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
    }
    if (!ref.token.empty()) e.checker().must_clean(e.id(), ref, start);
  }
  settle(e);
}

namespace {

// One grant of a reentrant lock kept by the keeper: at depth 1 or 2, and
// after a partial release (depth 2 -> 1, still held) kept again.
void reentrant_kept(Env& e, ReentrantLock& lock, LeaseRef& ref, const KeeperOptions& ko,
                    bool watch) {
  ref.handle.assign(reinterpret_cast<const char*>(lock.handle().data), lock.handle().size);
  const bool twice = e.rng().chance(0.5) && lock.acquire(Nanos(0)).ok();
  report(e, lock, ref);
  if (!keep_loop(e, lock, ref, 0, ko, watch) || !twice || lock.depth() < 2) return;
  may_shorten(e, Millis(e.w().config().ttl_ms));  // the release re-arms the TTL
  const Status r = lock.release();
  report(e, lock, ref);
  if (r.ok() && lock.depth() > 0) {
    after_ok(e, lock, r, "partial release");
    keep_loop(e, lock, ref, 0, ko, watch);
  }
}

}  // namespace

void run_reentrant_keeper(Env& e) {
  const int keys = static_cast<int>(e.rng().uniform(2, 3));
  const KeeperOptions ko = pick_keeper_options(e);
  const bool watch = e.rng().chance(0.5);
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const std::string key = pick_key(e, "R", keys);
    ReentrantLock lock(e.conn());
    ReentrantLockOptions o;
    o.ttl = Millis(e.w().config().ttl_ms);
    o.drift_factor = e.w().config().drift_factor;
    if (!lock.init(Bytes::from_cstr(key.c_str()), o).ok()) return;
    e.checker().set_retry_min(e.id(), o.retry_min.count());
    LeaseRef ref = lock_ref(LeaseKind::kReentrant, key.c_str(), lock.owner());
    const Nanos wait = e.pick_wait();
    e.checker().waiting(e.id(), key, true);
    const Status s = wait == Nanos(0) ? lock.try_acquire() : lock.acquire(wait);
    e.checker().waiting(e.id(), key, false);
    if (s.ok()) {
      ++e.w().stats().grants;
      e.checker().granted(e.id(), key, lock.fence(), ref.token);
      after_ok(e, lock, s, "acquire");
      reentrant_kept(e, lock, ref, ko, watch);
    }
    e.checker().unclaim(e.id(), 0);
    for (int i = 0; i < 8 && lock.release().code() != ErrorCode::kNotHeld; ++i) {
      e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 4));
    }
  }
  settle(e);
}

}  // namespace sim
}  // namespace edgelock
