// The checker's clean-up invariant: after a release or a failed acquire,
// once the requests sent by then have settled, no key of ours remains
// (with the excuses listed in docs/simulation.md), and at the end none at all.
#include <cstdint>
#include <cstdio>

#include "world/checker.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

void Checker::must_clean(int client, const LeaseRef& ref, int64_t op_start) {
  if (ref.kind == LeaseKind::kReentrant) return;  // owner and handle are reused by the next cycle
  Obligation o;
  o.client = client;
  o.ref = ref;
  o.op_start = op_start;
  const int n = ref.kind == LeaseKind::kQuorum ? static_cast<int>(w_.server_count()) : 1;
  for (int s = 0; s < n; ++s) {
    o.pending.push_back(w_.unsettled(client, s));
    o.done.push_back(false);
  }
  obligations_.push_back(o);
}

void Checker::note_release_written(int client, int server, int conn, const std::string& token) {
  released_on_conn_[conn].insert(token);
  for (int s = 0; s < static_cast<int>(w_.server_count()); ++s) {
    const auto key = std::make_tuple(client, token, s);
    if (must_queue_.count(key)) continue;
    for (const auto& p : w_.unsettled(client, s)) {
      const auto end = request_end_.find(p.first);
      const bool request = end != request_end_.end() && w_.conn(p.first).settled < end->second;
      if (request && !w_.conn(p.first).client_closed) must_queue_[key] = p.first;
    }
  }
  (void)server;
}

bool Checker::straggler(const Obligation& o, int s) const {
  // A quorum release that reached a majority is a release: a minority may
  // keep the key until its TTL (quorum_lock.h). Except where a request of
  // ours was in flight when the release began, on a connection the client
  // then closed without queueing the release behind it: that server runs
  // the request with nothing after it.
  if (o.ref.kind != LeaseKind::kQuorum || w_.config().strict_cleanup) return false;
  auto q = must_queue_.find(std::make_tuple(o.client, o.ref.token, s));
  auto r = q == must_queue_.end() ? released_on_conn_.end() : released_on_conn_.find(q->second);
  const bool queued =
      q == must_queue_.end() || (r != released_on_conn_.end() && r->second.count(o.ref.token) != 0);
  return queued && excused(Excuse::kQuorumMinority);
}

bool Checker::refused(const Obligation& o, int s) const {
  // A release the server refused with an error reply (NOSCRIPT left for
  // after the round, OOM): the key stays until its TTL, as documented.
  auto r = releases_.find({o.client, s});
  if (r == releases_.end()) return false;
  auto t = r->second.find(o.ref.token);
  return t != r->second.end() && t->second.refused && excused(Excuse::kRefused);
}

bool Checker::exempt(const Obligation& o, int s) const {
  // A partition, reset or restart may have kept the release from the server.
  if (w_.last_unreachable(o.client, s) >= o.op_start) return excused(Excuse::kUnreachable);
  // An acquire given up on ran late and granted (or re-armed) a lease the
  // client no longer claims: it lapses by its TTL (docs/late-requests.md).
  if (late_acquire_.count({o.client, o.ref.token}) != 0) return excused(Excuse::kLateAcquire);
  // Known gap (--strict-cleanup shows it): a command that timed out had its
  // connection closed, so a release sent later cannot be queued behind it,
  // and a frozen or slow server may run it after the release (Lock and
  // Semaphore after any timeout; QuorumLock when a round before the
  // release ended at its deadline). A quorum release round that gives the
  // connection up instead of queueing the release is not excused: there the
  // close comes after the last release was written. (A token may be reused
  // by a later acquire: count from its first use.)
  if (w_.config().strict_cleanup) return false;
  auto f = token_first_sent_.find({o.client, o.ref.token});
  const int64_t first = f == token_first_sent_.end() ? o.op_start : f->second;
  if (o.ref.kind != LeaseKind::kQuorum) {
    // Lock, Semaphore: a timeout since the token's first use, then a
    // release written after it (on another connection) or a release attempt
    // that failed too. Not a client that never tried: a failed acquire
    // keeps its token so release() can clean up.
    auto rs = releases_.find({o.client, s});
    int64_t written = -1;
    if (rs != releases_.end()) {
      auto t = rs->second.find(o.ref.token);
      if (t != rs->second.end()) written = t->second.last_written;
    }
    const std::vector<int64_t>& fails = w_.timed_out(o.client, s);
    for (size_t i = 0; i < fails.size(); ++i) {
      if (fails[i] < first) continue;
      if (written >= fails[i] || i + 1 < fails.size()) return excused(Excuse::kTimeoutGap);
    }
    return false;
  }
  auto r = last_release_.find({o.client, o.ref.token});
  if (r != last_release_.end() && w_.abandoned_between(o.client, s, first, r->second)) {
    return excused(Excuse::kTimeoutGap);
  }
  return false;
}

bool Checker::excused(Excuse kind) const {
  excuse(kind);
  return true;
}

void Checker::check_obligations() {
  for (size_t i = 0; i < obligations_.size();) {
    Obligation& o = obligations_[i];
    bool open = false;
    for (size_t s = 0; s < o.pending.size(); ++s) {
      if (o.done[s]) continue;
      const int si = static_cast<int>(s);
      bool settled = true;
      for (const auto& p : o.pending[s]) settled = settled && w_.conn(p.first).settled >= p.second;
      if (!settled) {
        open = true;
        continue;
      }
      o.done[s] = true;
      if (held_until(si, o.ref) <= w_.now() || exempt(o, si)) continue;
      if (!refused(o, si) && !straggler(o, si)) {
        violation("cleanup",
                  "c%d's %s token %.8s... is still on s%d after its release/failed acquire settled",
                  o.client, o.ref.key.c_str(), o.ref.token.c_str(), si);
      }
    }
    if (open) {
      ++i;
    } else {
      obligations_.erase(obligations_.begin() + static_cast<long>(i));
    }
  }
}

void Checker::at_end() {
  check_obligations();
  for (const Obligation& o : obligations_) {
    for (size_t s = 0; s < o.pending.size(); ++s) {
      if (!o.done[s] && held_until(static_cast<int>(s), o.ref) > w_.now() &&
          !exempt(o, static_cast<int>(s))) {
        violation("cleanup", "c%d's %s token still on s%zu at the end", o.client, o.ref.key.c_str(),
                  s);
      }
    }
  }
  // Every workload released before it ended, with faults long stopped.
  for (size_t s = 0; s < w_.server_count(); ++s) {
    ServerProc& sp = w_.server(static_cast<int>(s));
    const int64_t now_ms = w_.server_us(static_cast<int>(s), w_.now()) / 1000;
    for (const char* key : kLeaseKeys) {
      const Entry* e = sp.core->db(w_.config().db).peek(key, now_ms);
      if (e && !data_lost_) {
        violation("cleanup", "%s still on s%zu at the end (%lld ms left)", key, s,
                  static_cast<long long>(e->expire_at_ms < 0 ? -1 : e->expire_at_ms - now_ms));
      }
    }
  }
  int waiting = 0;
  for (const auto& k : waiters_) {
    for (const auto& c : k.second) waiting += c.second ? 1 : 0;
  }
  for (int c = 0; c < w_.config().clients; ++c) {
    if (!w_.client(c).finished)
      violation("liveness", "c%d never finished (%d clients waiting)", c, waiting);
  }
}

}  // namespace sim
}  // namespace edgelock
