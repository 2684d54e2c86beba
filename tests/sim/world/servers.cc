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

}  // namespace

extern const char* const kInjected[];
const char* const kInjected[] = {
    "",
    "OOM command not allowed when used memory > 'maxmemory'.",
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
    "LOADING Redis is loading the dataset in memory",
    "READONLY You can't write against a read only replica.",
};

namespace {

std::string request_text(const std::vector<std::string>& argv) {
  std::string t;
  size_t first = 0;
  if ((argv[0] == "EVALSHA" || argv[0] == "EVAL") && argv.size() >= 3) {
    const std::string sha = argv[0] == "EVAL" ? script_sha1(argv[1]) : argv[1];
    const char* n = library_script_name(sha);
    t = std::string(argv[0] == "EVAL" ? "EVAL " : "") + (n ? n + 1 : "?script");
    first = 3;
  } else {
    t = argv[0];
    first = 1;
  }
  for (size_t i = first; i < argv.size(); ++i) t += " " + argv[i];
  return t;
}

}  // namespace

class ServerSink final : public ServerCore::Sink,
                         public ServerCore::Interceptor,
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
    w_->checker().on_request(server_, c.client, argv, reply, blocked,
                             c.client_closed ? c.closed_at : -1);
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
  int64_t t = true_at_server_us(s.id, us + 1) + net_rng_.uniform(0, 2 * kMs);
  // A deadline already past (a BLPOP whose timeout rounds to the current
  // ms, a wait that was due while the server could not run) is due now:
  // timer_at must be the instant the event runs, or server_timer() takes it
  // for a superseded timer and the blocked client never times out.
  if (t < now_) t = now_;
  if (s.timer_at >= now_ && s.timer_at <= t) return;
  s.timer_at = t;
  schedule(t, Ev::kServerTimer, s.id);
}

void World::check_server_timer(const ServerProc& s) const {
  if (s.state != ServerProc::State::kUp) return;
  const int64_t us = s.core->next_block_deadline_us();
  if (us < 0) return;
  const int64_t due = true_at_server_us(s.id, us + 1) + 2 * kMs;
  if (s.timer_at >= now_ && s.timer_at <= (due > now_ ? due : now_)) return;
  model_fail(
      "server s%d: a blocked client is due at server time %lld us but its timer is %s %lld "
      "(true time now %lld)",
      s.id, static_cast<long long>(us), s.timer_at < 0 ? "not armed" : "at",
      static_cast<long long>(s.timer_at), static_cast<long long>(now_));
}

void World::server_timer(int id) {
  ServerProc& s = server(id);
  if (s.timer_at != now_) return;  // superseded
  s.timer_at = -1;
  if (s.state != ServerProc::State::kUp) return;
  stats_.server_timeouts += s.core->expire_blocked(server_us(id, now_));
  arm_server_timer(s);
}

void World::server_crash(ServerProc& s, bool lose_data) {
  for (auto& cp : conns_) {
    SimConn& c = *cp;
    if (c.server != s.id) continue;
    if (c.server_side || !c.c2s.q.empty() || !c.s2c.q.empty())
      reset_conn(c, now_ + one_way_delay(false));
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
  stats_.server_timeouts += s.core->expire_blocked(server_us(s.id, now_));
  arm_server_timer(s);
}

}  // namespace sim
}  // namespace edgelock
