#pragma once
// A simulated client process as its workloads see it (private to
// tests/sim/world): its connections and clock, and the helpers that report
// to the checker what the library said (claims, contracts, clean-up).

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "edgelock/connection.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/lock.h"
#include "world/checker.h"
#include "world/sim_transport.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

constexpr int64_t kWorkMs = 1000000;  // ns

// One client process: its connections (one per server) and helpers.
class Env {
 public:
  Env(World& w, int c) : w_(w), c_(c), rng_(w.rng_for(c)) {}

  bool setup() {
    const RunConfig& cfg = w_.config();
    for (int s = 0; s < cfg.servers; ++s) {
      transports_.emplace_back(new SimTransport(&w_, c_));
      conns_.emplace_back(new Connection());
      ConnectionOptions o;
      o.clock = &clock();
      o.transport = transports_.back().get();
      o.command_timeout = Millis(cfg.command_timeout_ms);
      o.connect_timeout = Millis(cfg.command_timeout_ms);
      char url[128];
      std::snprintf(url, sizeof url, "redis://%s127.0.0.1:%d/%d",
                    cfg.password ? ":sim-secret@" : "", kSimPortBase + s, cfg.db);
      if (!conns_.back()->init(url, o).ok()) {
        w_.checker().violation("setup", "c%d: connection setup failed: %s", c_,
                               conns_.back()->last_error());
        return false;
      }
    }
    return true;
  }

  /// The process dies and starts again: its connections close (requests
  /// already sent may still run) and whatever it knew is gone.
  bool restart() {
    conns_.clear();
    transports_.clear();
    return setup();
  }

  World& w() { return w_; }
  Checker& checker() { return w_.checker(); }
  int id() const { return c_; }
  Clock& clock() { return *w_.client(c_).sim_clock; }
  Connection& conn(int s = 0) { return *conns_[static_cast<size_t>(s)]; }
  Connection* const* conn_array() {
    ptrs_.clear();
    for (auto& c : conns_) ptrs_.push_back(c.get());
    return ptrs_.data();
  }
  Prng& rng() { return rng_; }
  int64_t ttl_ns() const { return w_.config().ttl_ms * kWorkMs; }

  void sleep(int64_t ns) { clock().sleep_for(Nanos(ns)); }
  /// Sleeps on this client's clock until true time `t`.
  void sleep_until(int64_t t) {
    const int64_t d = w_.client(c_).clock.local(t) - w_.local_now(c_);
    if (d > 0) sleep(d);
  }
  /// The true instant `left` from now on this client's clock.
  int64_t end_after(Nanos left) const {
    return w_.true_at_local(c_, w_.local_now(c_) + left.count());
  }
  /// How long to wait in acquire(): 0 (try once), short, long, or forever.
  Nanos pick_wait() {
    switch (rng_.uniform(0, 5)) {
      case 0: return Nanos(0);
      case 1: return Nanos(rng_.log_uniform(kWorkMs, ttl_ns()));
      case 2: return kForever;
      default: return Nanos(rng_.log_uniform(ttl_ns() / 4, 6 * ttl_ns()));
    }
  }
  /// Time between cycles (never 0: an application retrying at once would
  /// itself be polling).
  void think() { sleep(rng_.log_uniform(5 * kWorkMs, ttl_ns())); }
  /// How long to hold: mostly within the validity, sometimes past it.
  int64_t pick_hold() {
    return rng_.log_uniform(kWorkMs / 2, rng_.chance(0.1) ? 3 * ttl_ns() : ttl_ns() / 2);
  }
  uint32_t pauses() const { return w_.client(c_).pause_count; }
  /// When the process last gave a request up from its loop (cancel()); -1: never.
  int64_t gave_up_at = -1;

 private:
  World& w_;
  int c_;
  Prng& rng_;
  std::vector<std::unique_ptr<SimTransport>> transports_;
  std::vector<std::unique_ptr<Connection>> conns_;
  std::vector<Connection*> ptrs_;
};

inline LeaseRef lock_ref(LeaseKind kind, const char* key, Bytes token) {
  LeaseRef r;
  r.kind = kind;
  r.key = key;
  r.token.assign(reinterpret_cast<const char*>(token.data), token.size);
  return r;
}

// Sets the claim to what the lock says now.
template <typename L>
void report(Env& e, const L& lock, const LeaseRef& ref, int slot = 0) {
  const Nanos left = lock.remaining();
  if (left > Nanos::zero()) {
    e.checker().claim(e.id(), slot, ref, e.end_after(left));
  } else {
    e.checker().unclaim(e.id(), slot);
  }
}

// Before a call that may shorten the lease (an extend, a reentrant release
// that re-arms the TTL): from the moment the request may run, the lease is
// only good until what it could set, so the application relies on no more.
inline void may_shorten(Env& e, Millis ttl, int slot = 0) {
  const int64_t old_end = e.checker().claim_end(e.id(), slot);
  if (old_end <= e.w().now()) return;
  const double f = e.w().config().drift_factor;
  const Nanos valid = Nanos(ttl) -
                      Nanos(static_cast<int64_t>(static_cast<double>(Nanos(ttl).count()) * f)) -
                      Millis(2);
  const int64_t could = e.end_after(valid);
  if (could < old_end) e.checker().shorten(e.id(), slot, could);
}

// What every lease call promises (lease.h, lock.h): ok from an acquire or
// an extend means held with validity left; after any release() call the
// lease is not claimed, whatever its outcome; a renewal started while held
// returns no later than the validity it renews (unless the process froze).
template <typename L>
void after_ok(Env& e, const L& lock, Status s, const char* what) {
  if (s.ok() && lock.remaining() <= Nanos::zero()) {
    e.checker().violation("contract", "c%d: %s returned ok with no validity left", e.id(), what);
  }
}

template <typename L>
void after_release(Env& e, const L& lock) {
  if (lock.remaining() > Nanos::zero()) {
    e.checker().violation("contract", "c%d: still held for %.3f ms after release()", e.id(),
                          static_cast<double>(lock.remaining().count()) / 1e6);
  }
}

// A renewal (extend, renew) timed against the validity it started with.
template <typename L, typename F>
Status renewal(Env& e, const L& lock, F call) {
  const Nanos before = lock.remaining();
  const int64_t end = before > Nanos::zero() ? e.end_after(before) : -1;
  const uint32_t pauses = e.pauses();
  const Status s = call();
  if (end >= 0 && e.pauses() == pauses && e.w().now() > end + 1000) {
    e.checker().violation("contract",
                          "c%d: a renewal returned %.3f ms after the validity it renewed ended",
                          e.id(), static_cast<double>(e.w().now() - end) / 1e6);
  }
  return s;
}

// Releases as the docs say: again after an unknown outcome, a few times.
template <typename L>
void release_all(Env& e, L& lock, const LeaseRef& ref, int64_t op_start) {
  e.checker().unclaim(e.id(), 0);
  for (int i = 0; i < 3; ++i) {
    const Status s = lock.release();
    after_release(e, lock);
    if (s.ok() || s.code() == ErrorCode::kNotHeld || s.code() == ErrorCode::kNotOwner) break;
    e.sleep(e.rng().log_uniform(kWorkMs, e.ttl_ns() / 2));
  }
  if (!ref.token.empty()) e.checker().must_clean(e.id(), ref, op_start);
}

// Holds a granted lock for a while: sleeps, extends, asks the server.
template <typename L>
void hold(Env& e, L& lock, const LeaseRef& ref) {
  const int steps = static_cast<int>(e.rng().uniform(0, 3));
  for (int i = 0; i <= steps; ++i) {
    e.sleep(e.pick_hold());
    report(e, lock, ref);
    if (i == steps) break;
    switch (e.rng().uniform(0, 3)) {
      case 0: {
        const Millis ttl(e.rng().log_uniform(1, 3 * e.w().config().ttl_ms));
        may_shorten(e, ttl);
        const ExtendMode mode = e.rng().chance(0.5) ? ExtendMode::kAdd : ExtendMode::kReplace;
        after_ok(e, lock, renewal(e, lock, [&] { return lock.extend(ttl, mode); }), "extend");
        break;
      }
      case 1:
        may_shorten(e, Millis(e.w().config().ttl_ms));
        after_ok(e, lock, renewal(e, lock, [&] { return lock.renew(); }), "renew");
        break;
      case 2: lock.owned().status().ignore(); break;
      default: break;
    }
    report(e, lock, ref);
  }
}

// Renews with a LeaseKeeper from a poll-style loop until the hold ends or
// the keeper reports the loss.
template <typename L>
void keep(Env& e, L& lock, const LeaseRef& ref, LeaseKeeper& keeper) {
  if (!keeper.start().ok()) return;
  const int64_t stop = e.w().now() + e.rng().log_uniform(e.ttl_ns() / 2, 6 * e.ttl_ns());
  uint32_t pauses = e.pauses();
  for (int i = 0; i < 100000 && e.w().now() < stop; ++i) {
    const int64_t believed = e.checker().claim_end(e.id(), 0);
    const Deadline next = keeper.next_deadline();
    const int64_t wake = next.is_never()
                             ? stop
                             : e.w().true_at_local(e.id(), next.when().time_since_epoch().count());
    e.sleep_until(wake < stop ? wake : stop);
    if (e.w().now() >= stop) break;
    const LeaseState st = keeper.step();
    // A process frozen since it last looked cannot hear of a loss in time.
    const bool paused = e.pauses() != pauses;
    pauses = e.pauses();
    e.checker().keeper_report(e.id(), 0, st == LeaseState::kLost, believed, paused);
    if (st == LeaseState::kLost) {
      e.gave_up_at = e.w().now();  // a renewal out may have been given up
      e.checker().unclaim(e.id(), 0);
      return;
    }
    // The loop relies on the lease until its next wake-up at the latest.
    const Deadline d = keeper.next_deadline();
    Nanos left = lock.remaining();
    if (!d.is_never()) {
      const Nanos until_next = d.when() - e.clock().now();
      if (until_next > left) left = until_next;
    }
    if (left > Nanos::zero()) e.checker().claim(e.id(), 0, ref, e.end_after(left));
  }
  if (keeper.renewing()) e.gave_up_at = e.w().now();
  keeper.stop();
}

void run_semaphore(Env& e);
void run_reentrant(Env& e);
// A RateLimiter of `limit` per config().period_ms on `key`.
void run_rate(Env& e, int64_t limit, const char* key);
void run_fair(Env& e);

}  // namespace sim
}  // namespace edgelock
