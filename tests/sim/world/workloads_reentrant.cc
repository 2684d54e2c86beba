// ReentrantLock from a poll loop (start_acquire, start_extend,
// start_release, cancel() in the middle of an acquire): held at depth 2,
// released once and still held, extended; and two handles sharing one owner
// id on the same key (the second is busy while the first holds, and its
// own requests never act on the first's grant). 2-3 keys per client.
#include <memory>
#include <vector>

#include "edgelock/reentrant_lock.h"
#include "world/loop_env.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = kWorkMs;

// One handle on one key, with what the checker knows of it.
struct Handle {
  explicit Handle(Connection& c) : lock(c) {}
  ReentrantLock lock;
  LeaseRef ref;
  int slot = 0;
};

bool init_handle(Env& e, Handle& h, const std::string& key, Bytes owner, int slot) {
  ReentrantLockOptions o;
  o.ttl = Millis(e.w().config().ttl_ms);
  o.drift_factor = e.w().config().drift_factor;
  if (!h.lock.init(Bytes::from_cstr(key.c_str()), o, owner).ok()) return false;
  e.checker().set_retry_min(e.id(), o.retry_min.count());
  h.ref.kind = LeaseKind::kReentrant;
  h.ref.key = key;
  h.ref.token.assign(reinterpret_cast<const char*>(h.lock.owner().data), h.lock.owner().size);
  h.slot = slot;
  return true;
}

void note(Env& e, Handle& h) { report(e, h.lock, h.ref, h.slot); }

// One level more from the loop (a first level is a new grant, new nonce).
Status enter(Env& e, Handle& h, bool try_only) {
  const bool fresh = h.lock.depth() == 0;
  e.checker().waiting(e.id(), h.ref.key, !try_only);
  bool cancelled = false;
  const int64_t cancel_at = try_only ? -1 : pick_cancel(e);
  const Nanos wait = try_only ? Nanos(0) : e.pick_wait();
  const Status s0 = wait == Nanos(0) ? h.lock.start_try_acquire() : h.lock.start_acquire(wait);
  const Status s = drive(e, h.lock, s0, cancel_at, &cancelled);
  e.checker().waiting(e.id(), h.ref.key, false);
  if (cancelled && fresh && h.lock.remaining() > Nanos::zero()) {
    e.checker().violation("contract", "c%d: held after cancel() of its acquire", e.id());
  }
  if (!s.ok()) return s;
  ++e.w().stats().grants;
  h.ref.handle.assign(reinterpret_cast<const char*>(h.lock.handle().data), h.lock.handle().size);
  if (fresh) e.checker().granted(e.id(), h.ref.key, h.lock.fence(), h.ref.token);
  after_ok(e, h.lock, s, "acquire");
  note(e, h);
  return s;
}

void extend_from_loop(Env& e, Handle& h) {
  const Millis ttl(e.rng().log_uniform(1, 2 * e.w().config().ttl_ms));
  may_shorten(e, ttl, h.slot);
  const Status s = renewal(e, h.lock, [&] { return drive(e, h.lock, h.lock.start_extend(ttl)); });
  after_ok(e, h.lock, s, "extend");
  note(e, h);
}

// Releases one level; ok above depth 1 means the levels left are held.
Status release_one(Env& e, Handle& h) {
  if (h.lock.depth() > 1) {
    may_shorten(e, Millis(e.w().config().ttl_ms), h.slot);  // the release re-arms the TTL
  } else {
    e.checker().unclaim(e.id(), h.slot);
  }
  const Status s = drive(e, h.lock, h.lock.start_release());
  if (s.ok() && h.lock.depth() > 0) after_ok(e, h.lock, s, "partial release");
  note(e, h);
  return s;
}

// Every level, also those of unknown outcome, until nothing is left.
void release_levels(Env& e, Handle& h) {
  e.checker().unclaim(e.id(), h.slot);
  for (int i = 0; i < 6; ++i) {
    const Status r = drive(e, h.lock, h.lock.start_release());
    if (r.code() == ErrorCode::kNotHeld) break;
    if (!r.ok()) e.sleep(e.rng().log_uniform(kMs, e.ttl_ns() / 2));
  }
  e.checker().unclaim(e.id(), h.slot);
}

// Depth 2, one release (still held at depth 1), then an extend.
void nested(Env& e, Handle& h) {
  if (!enter(e, h, true).ok() || h.lock.depth() < 2) return;
  e.sleep(e.pick_hold());
  note(e, h);
  if (e.rng().chance(0.3)) extend_from_loop(e, h);
  if (!release_one(e, h).ok()) return;
  e.sleep(e.pick_hold() / 2);
  note(e, h);
  extend_from_loop(e, h);
  e.sleep(e.pick_hold() / 2);
  note(e, h);
}

// A second handle with the first one's owner id: it holds (sometimes past
// its validity), then the first tries the key, then the second extends.
// Its extend must not act on the first's grant (another nonce).
void shared_owner(Env& e, Handle& a, Handle& b) {
  if (!enter(e, b, false).ok()) {
    release_levels(e, b);
    return;
  }
  e.sleep(e.pick_hold());
  note(e, b);
  if (enter(e, a, true).ok()) {
    e.sleep(e.pick_hold() / 4);
    note(e, a);
  }
  extend_from_loop(e, b);
  e.sleep(e.pick_hold() / 4);
  note(e, a);
  note(e, b);
  release_levels(e, a);
  release_levels(e, b);
}

}  // namespace

void run_reentrant_loop(Env& e) {
  const int keys = static_cast<int>(e.rng().uniform(2, 3));
  std::vector<std::unique_ptr<Handle>> firsts, seconds;
  for (int k = 0; k < keys; ++k) {
    const std::string key = k == 0 ? std::string("R") : "R" + std::to_string(k);
    firsts.emplace_back(new Handle(e.conn()));
    seconds.emplace_back(new Handle(e.conn()));
    if (!init_handle(e, *firsts.back(), key, Bytes(), 0)) return;
    if (!init_handle(e, *seconds.back(), key, firsts.back()->lock.owner(), 1)) return;
  }
  while (!e.w().stopping()) {
    e.think();
    if (e.w().stopping()) break;
    const size_t k = static_cast<size_t>(e.rng().uniform(0, keys - 1));
    Handle& a = *firsts[k];
    if (e.rng().chance(0.25)) {
      shared_owner(e, a, *seconds[k]);
      continue;
    }
    if (enter(e, a, false).ok()) {
      e.sleep(e.pick_hold());
      note(e, a);
      if (e.rng().chance(0.6)) nested(e, a);
    }
    release_levels(e, a);
  }
  for (size_t k = 0; k < firsts.size(); ++k) {
    release_levels(e, *firsts[k]);
    release_levels(e, *seconds[k]);
  }
  settle(e);
}

}  // namespace sim
}  // namespace edgelock
