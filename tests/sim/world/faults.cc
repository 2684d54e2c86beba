// Faults: planned from the seed before the run starts (a Poisson stream
// over the fault phase), applied and undone as events.
#include <cmath>

#include "world/checker.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

extern const char* const kInjected[];

namespace {
constexpr int64_t kMs = 1000000;
}  // namespace

// One fault starting at `start`: its kind, target and length.
Fault World::random_fault(int64_t start) {
  const int64_t ttl = cfg_.ttl_ms * kMs;
  Fault f;
  f.start = start;
  f.end = f.start + fault_rng_.log_uniform(kMs / 2, 3 * ttl);
  if (f.end > cfg_.fault_phase_ns) f.end = cfg_.fault_phase_ns;
  const int kind = static_cast<int>(fault_rng_.uniform(0, 12));
  const int any_client = cfg_.clients - 1, any_server = cfg_.servers - 1;
  if (kind < 3) {
    f.kind = FaultKind::kPartition;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_client));
    f.b = static_cast<int>(fault_rng_.uniform(0, any_server));
    f.c = static_cast<int>(fault_rng_.uniform(1, 3));
  } else if (kind < 5) {
    f.kind = FaultKind::kServerPause;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_server));
  } else if (kind < 6) {
    f.kind = FaultKind::kServerRestart;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_server));
    f.c = cfg_.data_loss ? 1 : 0;
    f.end = f.start + fault_rng_.log_uniform(kMs, ttl);
    // The delayed-restart rule: down for longer than any lease it held could
    // last (not the TTL: extends in 'add' mode stack up; the workloads reach
    // about 10 TTLs), plus the drift.
    if (cfg_.delayed_restart && f.c)
      f.end = f.start + 12 * ttl + 50 * kMs + fault_rng_.uniform(0, ttl);
  } else if (kind < 8) {
    f.kind = FaultKind::kClientPause;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_client));
  } else if (kind < 9) {
    f.kind = FaultKind::kScriptFlush;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_server));
    f.end = f.start;
  } else if (kind == 12) {
    f.kind = FaultKind::kRogueHolder;
  } else {
    f.kind = FaultKind::kErrorReplies;
    f.a = static_cast<int>(fault_rng_.uniform(0, any_server));
    f.c = static_cast<int>(fault_rng_.uniform(1, 4));
    f.end = f.start + fault_rng_.log_uniform(kMs / 2, ttl / 2 > kMs ? ttl / 2 : kMs);
  }
  return f;
}

void World::plan_faults() {
  if (cfg_.faults_per_s <= 0) return;
  double t = 0;
  for (int i = 0; i < 100000; ++i) {
    // Exponential gaps: a Poisson stream of faults.
    t += -std::log(1.0 - fault_rng_.unit()) / cfg_.faults_per_s * 1e9;
    if (t >= static_cast<double>(cfg_.fault_phase_ns)) break;
    faults_.push_back(random_fault(static_cast<int64_t>(t)));
    const Fault& f = faults_.back();
    const int idx = static_cast<int>(faults_.size()) - 1;
    schedule(f.start, Ev::kFaultStart, idx);
    if (f.end > f.start) schedule(f.end, Ev::kFaultEnd, idx);
  }
}

void World::freeze(int client, int64_t start, int64_t end) {
  Fault f;
  f.kind = FaultKind::kClientPause;
  f.a = client;
  f.start = start;
  f.end = end;
  faults_.push_back(f);
  const int idx = static_cast<int>(faults_.size()) - 1;
  schedule(f.start, Ev::kFaultStart, idx);
  schedule(f.end, Ev::kFaultEnd, idx);
}

// True if another fault of this kind on this target still runs (overlapping
// pauses and restarts end with the last one).
bool World::still_faulted(const Fault& f) const {
  for (const Fault& g : faults_) {
    if (g.kind == f.kind && g.a == f.a && g.start <= now_ && g.end > now_) return true;
  }
  return false;
}

void World::unreachable_until(int client, int server, int64_t end) {
  for (int c = 0; c < cfg_.clients; ++c) {
    if (client >= 0 && c != client) continue;
    int64_t& u = unreachable_[key(c, server)];
    if (end > u) u = end;
  }
}

// Another client (an older library, a hand-made key) holding the lock key
// with no TTL: waiters must back off, not poll.
void World::rogue(bool on) {
  const char* key = cfg_.quorum() ? "Q" : (cfg_.work[0] == Work::kFair ? "F" : "L");
  for (int i = 0; i < cfg_.servers; ++i) {
    // On the data itself, whatever the process is doing: the rogue client
    // got its command in just before a pause or crash, or just after.
    ServerProc& s = server(i);
    Keyspace& ks = s.core->db(cfg_.db);
    const int64_t us = server_us(i, now_);
    if (on) {
      ks.call({"SET", key, "rogue-holder", "NX"}, us / 1000, us);
      continue;
    }
    const Entry* e = ks.peek(key, us / 1000);
    if (e && e->type == KeyType::kString && e->str == "rogue-holder")
      ks.call({"DEL", key}, us / 1000, us);
  }
}

void World::start_partition(const Fault& f) {
  for (int dir = 0; dir < 2; ++dir) {
    if (!(f.c & (1 << dir))) continue;
    int64_t& u = link_down_until_[key(f.a, f.b) * 2 + static_cast<size_t>(dir)];
    if (f.end > u) u = f.end;
  }
  unreachable_until(f.a, f.b, f.end);
  trace("fault: partition c%d-s%d %s until %.3f", f.a, f.b,
        f.c == 3 ? "both ways" : (f.c == 1 ? "to server" : "to client"),
        static_cast<double>(f.end) / 1e6);
}

void World::start_restart(const Fault& f) {
  ServerProc& s = server(f.a);
  if (s.state == ServerProc::State::kDown) return;
  server_crash(s, f.c != 0);
  unreachable_until(-1, f.a, f.end);
  trace("fault: s%d killed (%s), back at %.3f", f.a, f.c ? "data lost" : "data kept",
        static_cast<double>(f.end) / 1e6);
  checker_->on_server_restart(f.a, f.c != 0);
}

void World::fault_start(int index) {
  const Fault& f = faults_[static_cast<size_t>(index)];
  ++stats_.faults[static_cast<int>(f.kind)];
  const double until = static_cast<double>(f.end) / 1e6;
  switch (f.kind) {
    case FaultKind::kPartition: start_partition(f); break;
    case FaultKind::kServerPause:
      if (server(f.a).state == ServerProc::State::kUp)
        server(f.a).state = ServerProc::State::kPaused;
      trace("fault: s%d paused until %.3f", f.a, until);
      break;
    case FaultKind::kServerRestart: start_restart(f); break;
    case FaultKind::kClientPause:
      client(f.a).paused = true;
      ++client(f.a).pause_count;
      trace("fault: c%d frozen until %.3f", f.a, until);
      break;
    case FaultKind::kScriptFlush:
      server(f.a).core->flush_scripts();
      trace("fault: s%d SCRIPT FLUSH", f.a);
      break;
    case FaultKind::kRogueHolder:
      rogue(true);
      trace("fault: a holder without TTL takes the lock key until %.3f", until);
      break;
    case FaultKind::kErrorReplies:
      server(f.a).error_mode = f.c;
      unreachable_until(-1, f.a, f.end);  // a refused release leaves the key until its TTL
      trace("fault: s%d replies '%.20s...' until %.3f", f.a, kInjected[f.c], until);
      break;
  }
}

void World::end_client_pause(const Fault& f) {
  if (still_faulted(f)) return;
  ClientProc& c = client(f.a);
  c.paused = false;
  trace("fault over: c%d thawed", f.a);
  if (c.wake_pending) {
    c.wake_pending = false;
    wake(f.a);
  }
}

void World::fault_end(int index) {
  const Fault& f = faults_[static_cast<size_t>(index)];
  ServerProc* s = f.kind == FaultKind::kPartition || f.kind == FaultKind::kClientPause ||
                          f.kind == FaultKind::kRogueHolder
                      ? nullptr
                      : &server(f.a);
  switch (f.kind) {
    case FaultKind::kPartition: trace("fault over: partition c%d-s%d", f.a, f.b); break;
    case FaultKind::kServerPause:
      if (s->state != ServerProc::State::kPaused || still_faulted(f)) break;
      trace("fault over: s%d resumed", f.a);
      server_resume(*s);
      break;
    case FaultKind::kServerRestart:
      if (s->state != ServerProc::State::kDown || still_faulted(f)) break;
      s->state = ServerProc::State::kUp;
      s->lost.reset();
      trace("fault over: s%d up again", f.a);
      break;
    case FaultKind::kClientPause: end_client_pause(f); break;
    case FaultKind::kScriptFlush: break;
    case FaultKind::kRogueHolder:
      rogue(false);
      trace("fault over: the holder without TTL is gone");
      break;
    case FaultKind::kErrorReplies:
      s->error_mode = 0;
      trace("fault over: s%d replies normally", f.a);
      break;
  }
}

}  // namespace sim
}  // namespace edgelock
