#include "world/run_config.h"

#include <cstdio>

#include "world/prng.h"

namespace edgelock {
namespace sim {

const char* work_name(Work w) {
  switch (w) {
    case Work::kLock: return "lock";
    case Work::kLockKeeper: return "lock+keeper";
    case Work::kQuorum: return "quorum";
    case Work::kQuorumKeeper: return "quorum+keeper";
    case Work::kSemaphore: return "semaphore";
    case Work::kReentrant: return "reentrant";
    case Work::kCooldown: return "cooldown";
    case Work::kQuota: return "quota";
    case Work::kFair: return "fair";
    case Work::kLockLoop: return "lock-loop";
    case Work::kQuorumLoop: return "quorum-loop";
    case Work::kSemaphoreLoop: return "semaphore-loop";
    case Work::kReentrantLoop: return "reentrant-loop";
    case Work::kSemaphoreKeeper: return "semaphore+keeper";
    case Work::kReentrantKeeper: return "reentrant+keeper";
  }
  return "?";
}

namespace {

constexpr int64_t kMs = 1000000;

void pick_work(RunConfig& c, Prng& r, const RunOverrides& o) {
  c.work.clear();
  if (o.work >= 0) {
    c.work.assign(static_cast<size_t>(c.clients), static_cast<Work>(o.work));
    return;
  }
  if (c.quorum()) {
    for (int i = 0; i < c.clients; ++i) {
      const Work q[] = {Work::kQuorum, Work::kQuorum, Work::kQuorumKeeper, Work::kQuorumLoop};
      c.work.push_back(r.pick(q));
    }
    return;
  }
  const Work single[] = {
      Work::kLock,          Work::kLock,          Work::kLockKeeper,      Work::kSemaphore,
      Work::kReentrant,     Work::kCooldown,      Work::kQuota,           Work::kLockLoop,
      Work::kSemaphoreLoop, Work::kReentrantLoop, Work::kSemaphoreKeeper, Work::kReentrantKeeper};
  Work a = r.pick(single);
  Work b = r.chance(0.4) ? r.pick(single) : a;
  // FairLock from a stream of its own, so the other draws stay as they were.
  Prng fair(stream_seed(c.seed, 6));
  if (fair.chance(0.15)) {
    b = b == a ? Work::kFair : b;
    a = Work::kFair;
  }
  for (int i = 0; i < c.clients; ++i) {
    Work w = (i % 2 == 0) ? a : b;
    // Lock and its keeper form share the key: mix them freely.
    if ((w == Work::kLock || w == Work::kLockKeeper) && r.chance(0.25)) {
      w = w == Work::kLock ? Work::kLockKeeper : Work::kLock;
    }
    c.work.push_back(w);
  }
}

void pick_topology(RunConfig& c, Prng& r, const RunOverrides& o) {
  const int quorum_sizes[] = {3, 3, 3, 5, 5, 7};
  c.servers = o.servers > 0 ? o.servers : (r.chance(0.3) ? r.pick(quorum_sizes) : 1);
  c.clients = o.clients > 0 ? o.clients : static_cast<int>(r.uniform(2, 8));
  if (o.work >= 0) {
    const Work w = static_cast<Work>(o.work);
    const bool wants_quorum =
        w == Work::kQuorum || w == Work::kQuorumKeeper || w == Work::kQuorumLoop;
    if (wants_quorum && c.servers == 1 && o.servers == 0) c.servers = 3;
    if (!wants_quorum && o.servers == 0) c.servers = 1;
  }
  pick_work(c, r, o);
}

void pick_timing(RunConfig& c, Prng& r) {
  const int64_t ttls[] = {60, 100, 250, 500, 1000, 3000};
  c.ttl_ms = r.pick(ttls);
  // The per-command budget: from a few ms to more than the TTL.
  const int64_t divisors[] = {20, 8, 4, 2, 1};
  c.command_timeout_ms = c.ttl_ms / r.pick(divisors);
  if (c.command_timeout_ms < 5) c.command_timeout_ms = 5;
  c.period_ms = r.pick(ttls);
  c.quota_max = static_cast<int>(r.uniform(1, 4));
  c.permits = static_cast<int>(r.uniform(1, 3));
  c.wake_on_release = !r.chance(0.2);
  c.password = r.chance(0.2);
  c.db = r.chance(0.2) ? 3 : 0;
}

void pick_network(RunConfig& c, Prng& r, const RunOverrides& o) {
  // Most messages fast, a seeded share very late.
  c.delay_min_ns = r.log_uniform(5000, 200000);
  c.delay_max_ns = c.delay_min_ns + r.log_uniform(10000, 3 * kMs);
  const double tails[] = {0, 0.0005, 0.003, 0.02};
  c.p_tail = r.pick(tails);
  c.tail_min_ns = 5 * kMs;
  c.tail_max_ns = c.ttl_ms * kMs * r.uniform(1, 4);
  const double resets[] = {0, 0, 0.001, 0.01};
  c.p_reset_before = r.pick(resets);
  c.p_reset_after = r.pick(resets);
  const double rates[] = {0, 0.5, 2, 8};
  c.faults_per_s = r.pick(rates) * 1000.0 / static_cast<double>(c.ttl_ms < 250 ? 250 : c.ttl_ms);
  // A command (and a reconnect's three round trips: connect, AUTH, SELECT)
  // must fit the per-command budget when the network is not delaying
  // anything on purpose, or nothing ever works.
  const int64_t floor_ms = 6 * c.delay_max_ns / kMs + 2;
  if (c.command_timeout_ms < floor_ms) c.command_timeout_ms = floor_ms;
  // The late-reply profile: replies that come just after the validity ended
  // but within a long command budget (grants too late to use, renewals
  // that come back after the lease ended).
  if (o.late_replies || r.chance(0.15)) {
    c.command_timeout_ms = 2 * c.ttl_ms + 10;
    c.p_tail = 0.05;
    c.tail_min_ns = c.ttl_ms * kMs * 8 / 10;
    c.tail_max_ns = c.ttl_ms * kMs * 13 / 10;
  }
}

void apply_overrides(RunConfig& c, const RunOverrides& o) {
  if (o.no_faults) {
    c.faults_per_s = 0;
    c.p_tail = 0;
    c.p_reset_before = c.p_reset_after = 0;
  }
  c.faults_per_s *= o.fault_scale;
  c.p_tail *= o.fault_scale;
  c.p_reset_before *= o.fault_scale;
  c.p_reset_after *= o.fault_scale;
  c.data_loss = o.data_loss;
  c.delayed_restart = o.delayed_restart;
  c.strict_cleanup = o.strict_cleanup;
}

}  // namespace

RunConfig RunConfig::from_seed(uint64_t seed, const RunOverrides& o) {
  RunConfig c;
  c.seed = seed;
  Prng r(stream_seed(seed, 1));
  pick_topology(c, r, o);
  pick_timing(c, r);
  pick_network(c, r, o);
  const int64_t phases[] = {3, 6, 12};
  c.fault_phase_ns = r.pick(phases) * c.ttl_ms * kMs + 300 * kMs;
  apply_overrides(c, o);
  // The calm phase: long enough for every fault's leftovers to expire and
  // every waiter to be served.
  c.stop_at_ns = c.fault_phase_ns + 4 * c.ttl_ms * kMs + 2000 * kMs;
  c.limit_ns = c.stop_at_ns + 30 * c.ttl_ms * kMs + 60000 * kMs;
  return c;
}

std::string RunConfig::describe() const {
  char buf[512];
  std::string works;
  for (size_t i = 0; i < work.size(); ++i) {
    if (i) works += ",";
    works += work_name(work[i]);
  }
  std::snprintf(
      buf, sizeof buf,
      "seed %llu: %d clients [%s], %d server%s, ttl %lld ms, command timeout %lld ms, "
      "period %lld ms, quota %d, permits %d, wake %s, delay %lld-%lld us, tail %.4f "
      "%lld-%lld ms, reset %.3f/%.3f, faults %.2f/s for %lld ms%s%s",
      static_cast<unsigned long long>(seed), clients, works.c_str(), servers,
      servers > 1 ? "s" : "", static_cast<long long>(ttl_ms),
      static_cast<long long>(command_timeout_ms), static_cast<long long>(period_ms), quota_max,
      permits, wake_on_release ? "on" : "off", static_cast<long long>(delay_min_ns / 1000),
      static_cast<long long>(delay_max_ns / 1000), p_tail,
      static_cast<long long>(tail_min_ns / kMs), static_cast<long long>(tail_max_ns / kMs),
      p_reset_before, p_reset_after, faults_per_s, static_cast<long long>(fault_phase_ns / kMs),
      data_loss ? ", data loss" : "", delayed_restart ? " (delayed restart)" : "");
  return buf;
}

}  // namespace sim
}  // namespace edgelock
