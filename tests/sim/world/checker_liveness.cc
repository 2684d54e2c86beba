// The checker's liveness invariant: once faults have stopped, a free lock
// that clients wait for is granted within a bound (docs/simulation.md).
#include <cstdint>
#include <string>

#include "world/checker.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

namespace {
constexpr int64_t kMs = 1000000;
}  // namespace

// A free key with waiting clients must be granted within `bound`. For a
// FairLock key (a waiter's wait is bounded: fair_lock.h) demand counts from
// the first waiter and lasts through the gaps between attempts (an acquire
// that fails at once, then the next cycle after its think time): it ends
// with a grant, or when nobody has asked for longer than any think time.
void Checker::check_starving(const std::string& key, int waiting, bool free, int64_t bound) {
  const int64_t now = w_.now();
  if (waiting > 0) asked_at_[key] = now;
  auto asked = asked_at_.find(key);
  const bool fair = wait_slack_.count(key) != 0;
  const int64_t quiet = fair ? 3 * w_.config().ttl_ms * kMs + 1000 * kMs : 0;
  if (!free || asked == asked_at_.end() || now - asked->second > quiet) {
    starved_since_.erase(key);
    return;
  }
  auto it = starved_since_.find(key);
  if (it == starved_since_.end()) {
    if (waiting > 0) starved_since_[key] = now;
  } else if (now - it->second > bound) {
    violation("liveness",
              "%s free for %.1f ms with clients asking for it (%d waiting now; faults stopped; "
              "bound %.1f ms)",
              key.c_str(), static_cast<double>(now - it->second) / 1e6, waiting,
              static_cast<double>(bound) / 1e6);
  }
}

void Checker::check_liveness() {
  const RunConfig& cfg = w_.config();
  const int64_t now = w_.now();
  const int64_t start = w_.calm_at() + 2 * cfg.ttl_ms * kMs + 1000 * kMs;
  if (!w_.calm() || now < start) return;
  // Backoff (retry_max 250 ms), a wake-up cap (500 ms), a reconnect's
  // backoff (up to 2 s) and a few round trips; plus one TTL: a lease nobody
  // claims any more (a short extend never cuts the server's TTL, a late
  // grant, a hand-back that never landed) lapses by then
  // (docs/late-requests.md).
  int64_t bound = 3000 * kMs + 2 * cfg.command_timeout_ms * kMs + cfg.ttl_ms * kMs;
  if (cfg.quorum()) bound += 5000 * kMs;
  for (const auto& k : waiters_) {
    if (k.first == "C" || k.first == "QT") continue;
    // FairLock (fair_lock.h): + one waiter timeout, a dead waiter's slack
    // at the head of the queue; the TTL of a frozen waiter granted while
    // it could not claim is in the bound already.
    auto slack = wait_slack_.find(k.first);
    const int64_t key_bound = bound + (slack == wait_slack_.end() ? 0 : slack->second);
    int n = 0;
    for (const auto& c : k.second) n += c.second ? 1 : 0;
    int held = 0;
    for (const auto& c : claims_) held += c.second.ref.key == k.first && c.second.end > now ? 1 : 0;
    const int limit = semaphore_key(k.first) ? cfg.permits : 1;
    check_starving(k.first, n, held < limit, key_bound);
  }
}

}  // namespace sim
}  // namespace edgelock
