#include "world/checker.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "model/scripts.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kNever = INT64_MAX;
// Rounding between the clocks (ns).
constexpr int64_t kSlack = 1000;

}  // namespace

Checker::Checker(World& w) : w_(w) {
  acquire_sha_[0] = detail::kAcquireScript.sha1;
  acquire_sha_[1] = detail::kSemAcquireScript.sha1;
  acquire_sha_[2] = detail::kReentrantAcquireScript.sha1;
  acquire_sha_[3] = detail::kQuorumAcquireScript.sha1;
  acquire_sha_[4] = detail::kFairAcquireScript.sha1;
}

void Checker::violation(const char* kind, const char* fmt, ...) {
  ++w_.stats().violations;
  if (failed_) return;
  failed_ = true;
  failure_kind_ = kind;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  w_.trace("VIOLATION %s: %s", kind, msg);
  if (w_.config().quiet) return;
  std::fprintf(stderr, "\nVIOLATION (%s) at %.3f ms: %s\n  %s\n  trace before it (shortened):\n",
               kind, static_cast<double>(w_.now()) / 1e6, msg, w_.config().describe().c_str());
  const std::vector<std::string> tail = w_.trace_tail();
  const size_t from = tail.size() > 60 ? tail.size() - 60 : 0;
  for (size_t i = from; i < tail.size(); ++i) std::fprintf(stderr, "    %s\n", tail[i].c_str());
}

// --- Workload reports.

void Checker::claim(int client, int slot, const LeaseRef& ref, int64_t end) {
  if (end <= w_.now()) {
    unclaim(client, slot);
    return;
  }
  Claim& c = claims_[{client, slot}];
  c.ref = ref;
  c.end = end;
}

void Checker::excuse(Excuse kind) const { ++w_.stats().excused[static_cast<int>(kind)]; }

void Checker::unclaim(int client, int slot) { claims_.erase({client, slot}); }

void Checker::shorten(int client, int slot, int64_t end) {
  auto it = claims_.find({client, slot});
  if (it != claims_.end() && end < it->second.end) it->second.end = end;
}

int64_t Checker::claim_end(int client, int slot) const {
  auto it = claims_.find({client, slot});
  return it == claims_.end() ? 0 : it->second.end;
}

void Checker::granted(int client, const std::string& key, uint64_t fence,
                      const std::string& token) {
  (void)token;  // fences are checked per key, whoever holds the token
  uint64_t& last = last_fence_[key];
  int& last_client = last_fence_client_[key];
  // The same fence again for the same client: its lease was never let go
  // (a reentrant lock whose last release did not run continues it).
  const bool continued = fence == last && last_client == client;
  last_client = client;
  if (fence <= last && !continued && data_lost_) {
    // A counter lost with its server's data: no restart delay restores it
    // (quorum_lock.h, limit (a)). Counted, not a failure of the library.
    ++w_.stats().fence_regressions;
    w_.trace("fence regression after data loss: c%d got %llu after %llu", client,
             static_cast<unsigned long long>(fence), static_cast<unsigned long long>(last));
  } else if (fence <= last && !continued) {
    violation("fencing", "c%d granted %s with fence %llu, not above the last grant's %llu", client,
              key.c_str(), static_cast<unsigned long long>(fence),
              static_cast<unsigned long long>(last));
  }
  if (fence > last) last = fence;
}

void Checker::admitted(int client, const std::string& key) {
  const uint64_t n = ++client_admits_[{client, key}];
  const uint64_t s = server_admits_[{client, key}];
  if (n > s) {
    violation("rate", "c%d reports admission %llu to %s, the server admitted it %llu times", client,
              static_cast<unsigned long long>(n), key.c_str(), static_cast<unsigned long long>(s));
  }
}

void Checker::waiting(int client, const std::string& key, bool on) { waiters_[key][client] = on; }

void Checker::died(int client) {
  for (auto& k : waiters_) k.second[client] = false;
}

void Checker::keeper_report(int client, int slot, bool lost, int64_t belief_end,
                            bool paused_since) {
  (void)slot;
  if (paused_since || belief_end <= 0) return;
  // Past the end it relied on, only the loss is left to report: a renewal
  // that comes back later is too late to count (lease_keeper.h).
  if (!lost && w_.now() >= belief_end) {
    violation("keeper",
              "c%d's keeper reported keeping %.3f ms after the validity it relied on ended", client,
              static_cast<double>(w_.now() - belief_end) / 1e6);
    return;
  }
  if (w_.now() > belief_end + kSlack) {
    violation("keeper", "c%d's keeper reported %s %.3f ms after the validity it relied on ended",
              client, lost ? "the loss" : "keeping",
              static_cast<double>(w_.now() - belief_end) / 1e6);
  }
}

// --- Server side.

namespace {

// ARGV[1] of a script request (the token of every lease script), or "".
std::string first_arg(const std::vector<std::string>& argv) {
  if (argv.size() < 3) return "";
  const size_t at = 3 + static_cast<size_t>(std::atoi(argv[2].c_str()));
  return at < argv.size() ? argv[at] : "";
}

// A script that releases a lease (its owner-checked delete).
bool is_release(const std::string& name) {
  return name == "kReleaseScript" || name == "kSemReleaseScript" || name == "kFairReleaseScript";
}

// The library script a request runs (its constant's name), or nullptr.
const char* script_of(const std::vector<std::string>& argv) {
  if ((argv[0] != "EVALSHA" && argv[0] != "EVAL") || argv.size() < 3) return nullptr;
  return library_script_name(argv[0] == "EVAL" ? script_sha1(argv[1]) : argv[1]);
}

}  // namespace

void Checker::on_request(int server, int client, const std::vector<std::string>& argv,
                         const RVal& reply, bool blocked, int64_t closed_at) {
  if (blocked) return;
  const char* n = script_of(argv);
  if (!n) return;
  const std::string name = n;
  const bool release = is_release(name);
  if (release && reply.is_error()) releases_[{client, server}][first_arg(argv)].refused = true;
  if (!reply.is_error()) on_script(server, client, name, argv, reply, closed_at);
  if (closed_at < 0) fresh_exec_[{client, first_arg(argv)}] = w_.now();
}

void Checker::on_rate_admit(int client, const std::vector<std::string>& argv, const RVal& reply,
                            int64_t now_ms) {
  const std::string& key = argv[3];
  ++server_admits_[{client, key}];
  const int m = std::atoi(argv[4].c_str());
  const int64_t window = std::atoll(argv[5].c_str());
  if (m == 1) {
    // A cooldown: the next admission only once the window has run out.
    auto it = once_last_.find(key);
    if (it != once_last_.end() && now_ms - it->second < window && !data_lost_) {
      violation("rate", "limit-1 %s admitted twice within %lld ms of server time (window %lld ms)",
                key.c_str(), static_cast<long long>(now_ms - it->second),
                static_cast<long long>(window));
    }
    once_last_[key] = now_ms;
  }
  const int n = ++rate_window_[{key, now_ms + reply.a[2].i}];
  if (n > m && !data_lost_) {
    violation("rate", "rate %s admitted %d times in one window (limit %d)", key.c_str(), n, m);
  }
}

void Checker::on_script(int server, int client, const std::string& name,
                        const std::vector<std::string>& argv, const RVal& reply,
                        int64_t closed_at) {
  const int64_t now_ms = w_.server_us(server, w_.now()) / 1000;
  auto fresh = fresh_exec_.find({client, first_arg(argv)});
  if (closed_at >= 0 && fresh != fresh_exec_.end() && fresh->second > closed_at) {
    // A request the client gave up on ran after a later one with its token
    // (docs/late-requests.md). Every lease stays checked: such a request
    // must change nothing the client claims. Only an acquire may leave
    // something behind (a grant the client no longer claims, for one TTL):
    // its cleanup is excused, narrowly and counted.
    const bool acquire = name == "kAcquireScript" || name == "kQuorumAcquireScript" ||
                         name == "kSemAcquireScript" || name == "kFairAcquireScript" ||
                         name == "kReentrantAcquireScript";
    if (acquire) late_acquire_[{client, first_arg(argv)}] = true;
  }
  if (name == "kRateScript" && reply.type == RType::kArray && reply.a.size() == 3 &&
      reply.a[0].i == 1) {
    on_rate_admit(client, argv, reply, now_ms);
  }
  // Polling: a busy reply is tagged so its arrival at the client is seen.
  bool busy = false;
  if (name == "kAcquireScript") busy = reply.type == RType::kInt && reply.i <= 0;
  if (name == "kQuorumAcquireScript") busy = reply.type == RType::kArray;  // {-pttl, counter}
  if (name == "kFairAcquireScript") {  // {fence, next} or {-wait_ms, position, seq}
    busy = reply.type == RType::kArray && !reply.a.empty() && reply.a[0].i <= 0;
  }
  if (name == "kSemAcquireScript" || name == "kReentrantAcquireScript") {
    busy = reply.type == RType::kArray && !reply.a.empty() && reply.a[0].i == 0;
  }
  if (busy) w_.tag_next_reply_busy();
}

void Checker::on_busy_reply(int client) {
  Poll& p = polls_[client];
  // The first one: a quorum's stragglers may arrive while it already sleeps.
  if (p.busy_at < 0) p.busy_at = w_.local_now(client);
}

void Checker::on_client_send(int client, int server, int conn, const std::string& bytes) {
  size_t off = 0;
  std::vector<std::string> argv;
  for (int k = 0; k < 8 && off < bytes.size(); ++k) {
    size_t used = 0;
    if (parse_request(bytes.data() + off, bytes.size() - off, &argv, &used) != RParse::kComplete)
      break;
    off += used;
    if (argv[0] != "AUTH" && argv[0] != "SELECT") request_end_[conn] = w_.conn(conn).sent;
    const char* n = script_of(argv);
    if (n) token_first_sent_.emplace(std::make_pair(client, first_arg(argv)), w_.now());
    const std::string name = n ? n : "";
    if (is_release(name)) {
      releases_[{client, server}][first_arg(argv)].last_written = w_.now();
      last_release_[{client, first_arg(argv)}] = w_.now();
      note_release_written(client, server, conn, first_arg(argv));
    }
  }
  Poll& p = polls_[client];
  if (bytes.find("BLPOP") != std::string::npos) {
    p.woken = true;
    return;
  }
  const bool attempt = bytes.find(acquire_sha_[0]) != std::string::npos ||
                       bytes.find(acquire_sha_[1]) != std::string::npos ||
                       bytes.find(acquire_sha_[2]) != std::string::npos ||
                       bytes.find(acquire_sha_[3]) != std::string::npos ||
                       bytes.find(acquire_sha_[4]) != std::string::npos;
  if (!attempt) return;
  if (p.busy_at < 0 || p.woken) {
    p.busy_at = -1;
    p.woken = false;
    p.fast = 0;
    return;
  }
  const int64_t gap = w_.local_now(client) - p.busy_at;
  auto it = retry_min_.find(client);
  const int64_t min_gap = it == retry_min_.end() ? 0 : it->second;
  // Three in a row: one quick retry at a key expiring this very ms is fine.
  p.fast = gap < min_gap ? p.fast + 1 : 0;
  if (p.fast >= 3) {
    violation("poll",
              "c%d retried a busy key %.3f ms after the busy reply, %d times in a row (backoff "
              "minimum %.3f ms)",
              client, static_cast<double>(gap) / 1e6, p.fast, static_cast<double>(min_gap) / 1e6);
  }
  p.busy_at = -1;
}

void Checker::on_server_restart(int server, bool data_lost) {
  (void)server;
  if (data_lost) data_lost_ = true;
}

// --- The checks.

int64_t Checker::held_until(int server, const LeaseRef& ref) const {
  ServerProc& s = w_.server(server);
  const int64_t now_ms = w_.server_us(server, w_.now()) / 1000;
  const Entry* e =
      s.lost ? s.lost->peek(ref.key, now_ms) : s.core->db(w_.config().db).peek(ref.key, now_ms);
  if (!e) return -1;
  int64_t end =
      e->expire_at_ms < 0 ? kNever : w_.true_at_server_us(server, (e->expire_at_ms + 1) * 1000);
  switch (ref.kind) {
    case LeaseKind::kLock:
    case LeaseKind::kQuorum:
      if (e->type != KeyType::kString || e->str != ref.token) return -1;
      return end;
    case LeaseKind::kPermit: {
      if (e->type != KeyType::kZset) return -1;
      auto it = e->scores.find(ref.token);
      if (it == e->scores.end()) return -1;
      const int64_t score_end =
          w_.true_at_server_us(server, static_cast<int64_t>(it->second) * 1000);
      return score_end < end ? score_end : end;
    }
    case LeaseKind::kReentrant: {
      if (e->type != KeyType::kHash) return -1;
      auto o = e->hash.find("owner");
      auto h = e->hash.find("handle");
      if (o == e->hash.end() || h == e->hash.end() || o->second != ref.token ||
          h->second != ref.handle) {
        return -1;
      }
      return end;
    }
  }
  return -1;
}

// A claim implies the server (a majority) holds our token until its end.
void Checker::check_truth(int client, const Claim& c) {
  const int64_t now = w_.now();
  const double left_ms = static_cast<double>(c.end - now) / 1e6;
  if (c.ref.kind == LeaseKind::kQuorum) {
    const int n = static_cast<int>(w_.server_count());
    int ok = 0;
    for (int s = 0; s < n; ++s) ok += held_until(s, c.ref) + kSlack >= c.end ? 1 : 0;
    if (ok < n / 2 + 1) {
      violation("truth",
                "c%d claims %s for %.3f ms more, only %d of %d servers hold its token that long",
                client, c.ref.key.c_str(), left_ms, ok, n);
    }
    return;
  }
  const int64_t until = held_until(0, c.ref);
  if (until + kSlack >= c.end) return;
  if (until < 0) {
    violation("truth", "c%d claims %s for %.3f ms more, the server does not hold its token", client,
              c.ref.key.c_str(), left_ms);
  } else {
    violation("truth", "c%d claims %s for %.3f ms more, the server holds it only %.3f ms more",
              client, c.ref.key.c_str(), left_ms, static_cast<double>(until - now) / 1e6);
  }
}

void Checker::check_claims() {
  const int64_t now = w_.now();
  std::map<std::string, int> holders;
  std::map<std::pair<std::string, std::string>, int> same_token;  // (key, token) -> clients
  for (auto it = claims_.begin(); it != claims_.end();) {
    if (it->second.end <= now) {
      it = claims_.erase(it);
      continue;
    }
    const Claim& c = it->second;
    ++it;
    ++holders[c.ref.key];
    if (++same_token[{c.ref.key, c.ref.token}] > 1) {
      violation("exclusion", "two clients hold %s with the same token \"%.8s\" at once",
                c.ref.key.c_str(), c.ref.token.c_str());
    }
    check_truth(std::prev(it)->first.first, c);
  }
  for (const auto& h : holders) {
    const int limit = semaphore_key(h.first) ? w_.config().permits : 1;
    if (h.second > limit) {
      violation("exclusion", "%d clients hold %s at once (limit %d)", h.second, h.first.c_str(),
                limit);
    }
  }
}

void Checker::after_event() {
  if (failed_) return;
  check_claims();
  check_obligations();
  check_liveness();
}

}  // namespace sim
}  // namespace edgelock
