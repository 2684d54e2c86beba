// Server processes and faults: each server is a ServerCore on its own
// clock; faults are planned from the seed before the run starts.
#include <cmath>
#include <cstdio>

#include "model/fail.h"
#include "model/scripts.h"
#include "world/checker.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

namespace {

constexpr int64_t kMs = 1000000;

const char* const kInjected[] = {
    "",
    "OOM command not allowed when used memory > 'maxmemory'.",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
    "LOADING Redis is loading the dataset in memory",
    "READONLY You can't write against a read only replica.",
};

std::string request_text(const std::vector<std::string>& argv) {
  std::string t;
  size_t first = 0;
  if ((argv[0] == "EVALSHA" || argv[0] == "EVAL") && argv.size() >= 3) {
    const std::string sha = argv[0] == "EVAL" ? script_sha1(argv[1]) : argv[1];
    const NativeEntry* n = find_native(sha);
    t = std::string(argv[0] == "EVAL" ? "EVAL " : "") + (n ? n->name + 1 : "?script");
    first = 3;
  } else {
    t = argv[0];
    first = 1;
  }
  for (size_t i = first; i < argv.size(); ++i) t += " " + argv[i];
  return t;
}

}  // namespace

class ServerSink final : public ServerCore::Sink, public ServerCore::Interceptor,
                         public ServerCore::Observer {
 public:
  ServerSink(World* w, int server) : w_(w), server_(server) {}

  void reply(int id, const std::string& bytes) override {
    const bool busy = w_->next_reply_busy_;
    w_->next_reply_busy_ = false;
    SimConn& c = w_->conn(id);
    if (!c.server_side) return;
    if (!w_->calm_ && w_->cfg_.p_reset_after > 0 && w_->net_rng_.chance(w_->cfg_.p_reset_after)) {
      w_->trace("conn %d c%d-s%d: reset (reply lost)", id, c.client, c.server);
      w_->reset_conn(c, w_->now_ + w_->one_way_delay(false));
      return;
    }
    Chunk ch;
    ch.bytes = bytes;
    ch.busy = busy;
    ch.ready_at = w_->now_ + w_->one_way_delay(false);
    w_->push(c, 1, std::move(ch));
  }

  bool intercept(int id, const std::vector<std::string>& argv, RVal* out) override {
    (void)id;
    const ServerProc& s = w_->server(server_);
    if (s.error_mode == 0) return false;
    const bool is_script = argv[0] == "EVALSHA" || argv[0] == "EVAL";
    // OOM and READONLY refuse writes (our scripts, BLPOP); BUSY and LOADING everything.
    if ((s.error_mode == 1 || s.error_mode == 4) && !is_script && argv[0] != "BLPOP") return false;
    if (argv[0] == "AUTH") return false;
    *out = RVal::error(kInjected[s.error_mode]);
    return true;
  }

  void executed(int id, const std::vector<std::string>& argv, const RVal& reply, size_t bytes,
                bool blocked) override {
    SimConn& c = w_->conn(id);
    c.consumed += bytes;
    w_->settle(c, bytes);
    ++w_->stats_.requests;
    w_->trace("s%d c%d: %s -> %s", server_, c.client, request_text(argv).c_str(),
              blocked ? "(blocks)" : describe(reply, 60).c_str());
    w_->checker().on_request(server_, c.client, argv, reply, blocked, c.client_closed ? c.closed_at : -1);
  }

 private:
  World* w_;
  int server_;
};

World::~World() {
  for (ServerSink* s : sinks_) delete s;
}

void World::init_servers() {
  for (ServerProc& s : servers_) {
    ServerSink* sink = new ServerSink(this, s.id);
    sinks_.emplace_back(sink);
    s.core.reset(new ServerCore(sink));
    s.core->set_interceptor(sink);
    s.core->set_observer(sink);
    if (cfg_.password) s.core->set_password("sim-secret");
  }
}

void World::server_input(ServerProc& s, SimConn& c, const std::string& bytes) {
  s.core->input(c.id, bytes, server_us(s.id, now_));
  arm_server_timer(s);
}

void World::arm_server_timer(ServerProc& s) {
  const int64_t us = s.core->next_block_deadline_us();
  if (us < 0 || s.state != ServerProc::State::kUp) return;
  // Redis times blocked clients out on its next event loop turn.
  const int64_t t = true_at_server_us(s.id, us + 1) + net_rng_.uniform(0, 2 * kMs);
  if (s.timer_at > now_ && s.timer_at <= t) return;
  s.timer_at = t;
  schedule(t, Ev::kServerTimer, s.id);
}

void World::server_timer(int id) {
  ServerProc& s = server(id);
  if (s.timer_at != now_) return;  // superseded
  s.timer_at = -1;
  if (s.state != ServerProc::State::kUp) return;
  s.core->expire_blocked(server_us(id, now_));
  arm_server_timer(s);
}

void World::server_crash(ServerProc& s, bool lose_data) {
  for (auto& cp : conns_) {
    SimConn& c = *cp;
    if (c.server != s.id) continue;
    if (c.server_side || !c.c2s.q.empty() || !c.s2c.q.empty()) reset_conn(c, now_ + one_way_delay(false));
    c.server_side = false;
  }
  for (auto& p : s.pending) settle(conn(p.first), p.second.bytes.size());
  s.pending.clear();
  if (lose_data) s.lost.reset(new Keyspace(s.core->db(cfg_.db)));
  s.core->restart(lose_data);
  s.state = ServerProc::State::kDown;
  ++s.restarts;
}

void World::server_resume(ServerProc& s) {
  s.state = ServerProc::State::kUp;
  std::deque<std::pair<int, Chunk>> pending;
  pending.swap(s.pending);
  for (auto& p : pending) {
    SimConn& c = conn(p.first);
    deliver_to_server(c, p.second);
    if (s.state != ServerProc::State::kUp) break;
  }
  s.core->expire_blocked(server_us(s.id, now_));
  arm_server_timer(s);
}

// Another client (an older library, a hand-made key) holding the lock key
// with no TTL: waiters must back off, not poll (issue 13, item 6).
void World::rogue(bool on) {
  const char* key = cfg_.quorum() ? "Q" : "L";
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
    if (e && e->type == KeyType::kString && e->str == "rogue-holder") ks.call({"DEL", key}, us / 1000, us);
  }
}

void World::plan_faults() {
  if (cfg_.faults_per_s <= 0) return;
  const int64_t ttl = cfg_.ttl_ms * kMs;
  double t = 0;
  for (int i = 0; i < 100000; ++i) {
    // Exponential gaps: a Poisson stream of faults.
    t += -std::log(1.0 - fault_rng_.unit()) / cfg_.faults_per_s * 1e9;
    if (t >= static_cast<double>(cfg_.fault_phase_ns)) break;
    Fault f;
    f.start = static_cast<int64_t>(t);
    const int64_t len = fault_rng_.log_uniform(kMs / 2, 3 * ttl);
    f.end = f.start + len;
    if (f.end > cfg_.fault_phase_ns) f.end = cfg_.fault_phase_ns;
    const int kind = static_cast<int>(fault_rng_.uniform(0, 12));
    if (kind < 3) {
      f.kind = FaultKind::kPartition;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.clients - 1));
      f.b = static_cast<int>(fault_rng_.uniform(0, cfg_.servers - 1));
      f.c = static_cast<int>(fault_rng_.uniform(1, 3));
    } else if (kind < 5) {
      f.kind = FaultKind::kServerPause;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.servers - 1));
    } else if (kind < 6) {
      f.kind = FaultKind::kServerRestart;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.servers - 1));
      f.c = cfg_.data_loss ? 1 : 0;
      f.end = f.start + fault_rng_.log_uniform(kMs, ttl);
      if (cfg_.delayed_restart && f.c) {
        // Down for longer than any lease it held could last: not the TTL,
        // the longest lease (extends in 'add' mode stack up: the workloads
        // reach about 10 TTLs), plus the drift.
        f.end = f.start + 12 * ttl + 50 * kMs + fault_rng_.uniform(0, ttl);
      }
    } else if (kind < 8) {
      f.kind = FaultKind::kClientPause;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.clients - 1));
    } else if (kind < 9) {
      f.kind = FaultKind::kScriptFlush;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.servers - 1));
      f.end = f.start;
    } else if (kind == 12) {
      f.kind = FaultKind::kRogueHolder;
    } else {
      f.kind = FaultKind::kErrorReplies;
      f.a = static_cast<int>(fault_rng_.uniform(0, cfg_.servers - 1));
      f.c = static_cast<int>(fault_rng_.uniform(1, 4));
      f.end = f.start + fault_rng_.log_uniform(kMs / 2, ttl / 2 > kMs ? ttl / 2 : kMs);
    }
    faults_.push_back(f);
    const int idx = static_cast<int>(faults_.size()) - 1;
    schedule(f.start, Ev::kFaultStart, idx);
    if (f.end > f.start) schedule(f.end, Ev::kFaultEnd, idx);
  }
}

void World::fault_start(int index) {
  const Fault& f = faults_[static_cast<size_t>(index)];
  ++stats_.faults[static_cast<int>(f.kind)];
  switch (f.kind) {
    case FaultKind::kPartition:
      for (int dir = 0; dir < 2; ++dir) {
        if (f.c & (1 << dir)) {
          int64_t& u = link_down_until_[key(f.a, f.b) * 2 + static_cast<size_t>(dir)];
          if (f.end > u) u = f.end;
        }
      }
      if (f.end > unreachable_[key(f.a, f.b)]) unreachable_[key(f.a, f.b)] = f.end;
      trace("fault: partition c%d-s%d %s until %.3f", f.a, f.b,
            f.c == 3 ? "both ways" : (f.c == 1 ? "to server" : "to client"), static_cast<double>(f.end) / 1e6);
      break;
    case FaultKind::kServerPause: {
      ServerProc& s = server(f.a);
      if (s.state == ServerProc::State::kUp) s.state = ServerProc::State::kPaused;
      trace("fault: s%d paused until %.3f", f.a, static_cast<double>(f.end) / 1e6);
      break;
    }
    case FaultKind::kServerRestart: {
      ServerProc& s = server(f.a);
      if (s.state == ServerProc::State::kDown) break;
      server_crash(s, f.c != 0);
      for (int c = 0; c < cfg_.clients; ++c) {
        if (f.end > unreachable_[key(c, f.a)]) unreachable_[key(c, f.a)] = f.end;
      }
      trace("fault: s%d killed (%s), back at %.3f", f.a, f.c ? "data lost" : "data kept",
            static_cast<double>(f.end) / 1e6);
      checker_->on_server_restart(f.a, f.c != 0);
      break;
    }
    case FaultKind::kClientPause: {
      ClientProc& c = client(f.a);
      c.paused = true;
      ++c.pause_count;
      trace("fault: c%d frozen until %.3f", f.a, static_cast<double>(f.end) / 1e6);
      break;
    }
    case FaultKind::kScriptFlush:
      server(f.a).core->flush_scripts();
      trace("fault: s%d SCRIPT FLUSH", f.a);
      break;
    case FaultKind::kRogueHolder:
      rogue(true);
      trace("fault: a holder without TTL takes the lock key until %.3f", static_cast<double>(f.end) / 1e6);
      break;
    case FaultKind::kErrorReplies:
      server(f.a).error_mode = f.c;
      // A refused release leaves the key until its TTL: as unreachable.
      for (int c = 0; c < cfg_.clients; ++c) {
        if (f.end > unreachable_[key(c, f.a)]) unreachable_[key(c, f.a)] = f.end;
      }
      trace("fault: s%d replies '%.20s...' until %.3f", f.a, kInjected[f.c], static_cast<double>(f.end) / 1e6);
      break;
  }
}

void World::fault_end(int index) {
  const Fault& f = faults_[static_cast<size_t>(index)];
  switch (f.kind) {
    case FaultKind::kPartition:
      trace("fault over: partition c%d-s%d", f.a, f.b);
      break;
    case FaultKind::kServerPause: {
      ServerProc& s = server(f.a);
      if (s.state != ServerProc::State::kPaused) break;
      // Overlapping pauses: resume at the last one's end.
      for (const Fault& g : faults_) {
        if (g.kind == FaultKind::kServerPause && g.a == f.a && g.start <= now_ && g.end > now_) return;
      }
      trace("fault over: s%d resumed", f.a);
      server_resume(s);
      break;
    }
    case FaultKind::kServerRestart: {
      ServerProc& s = server(f.a);
      if (s.state != ServerProc::State::kDown) break;
      // Overlapping restarts: up again at the last one's end.
      for (const Fault& g : faults_) {
        if (g.kind == FaultKind::kServerRestart && g.a == f.a && g.start <= now_ && g.end > now_) return;
      }
      s.state = ServerProc::State::kUp;
      s.lost.reset();
      trace("fault over: s%d up again", f.a);
      break;
    }
    case FaultKind::kClientPause: {
      for (const Fault& g : faults_) {
        if (g.kind == FaultKind::kClientPause && g.a == f.a && g.start <= now_ && g.end > now_) return;
      }
      ClientProc& c = client(f.a);
      c.paused = false;
      trace("fault over: c%d thawed", f.a);
      if (c.wake_pending) {
        c.wake_pending = false;
        wake(f.a);
      }
      break;
    }
    case FaultKind::kScriptFlush:
      break;
    case FaultKind::kRogueHolder:
      rogue(false);
      trace("fault over: the holder without TTL is gone");
      break;
    case FaultKind::kErrorReplies:
      server(f.a).error_mode = 0;
      trace("fault over: s%d replies normally", f.a);
      break;
  }
}

}  // namespace sim
}  // namespace edgelock
