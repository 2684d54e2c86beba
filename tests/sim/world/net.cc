// The simulated network: connections as two FIFO byte pipes with seeded
// per-message delays (long tail included), held while a partition blocks
// their direction and delivered when it heals (TCP retransmits), resets
// that lose a request or a reply, refused connects to a server that is
// down. Bytes a client wrote before closing are still delivered (FIN comes
// after them): a request abandoned by its sender may run late.
#include <cstring>

#include "model/fail.h"
#include "model/scripts.h"
#include "world/checker.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

namespace {
constexpr int64_t kMs = 1000000;

// "EVALSHA Acquire + BLPOP": what a write carries, for the trace.
std::string requests_summary(const uint8_t* data, size_t n) {
  const char* p = reinterpret_cast<const char*>(data);
  std::string out;
  size_t off = 0;
  std::vector<std::string> argv;
  for (int k = 0; k < 8 && off < n; ++k) {
    size_t used = 0;
    if (parse_request(p + off, n - off, &argv, &used) != RParse::kComplete) break;
    off += used;
    if (!out.empty()) out += " + ";
    if ((argv[0] == "EVALSHA" || argv[0] == "EVAL") && argv.size() > 1) {
      const char* e = library_script_name(argv[0] == "EVAL" ? script_sha1(argv[1]) : argv[1]);
      out += argv[0] + " " + (e ? e + 1 : "?");
    } else {
      out += argv[0];
    }
  }
  return out.empty() ? std::to_string(n) + " bytes" : out;
}

}  // namespace

int64_t World::one_way_delay(bool to_server) {
  (void)to_server;
  if (!calm_ && cfg_.p_tail > 0 && net_rng_.chance(cfg_.p_tail)) {
    const int64_t lo = cfg_.tail_min_ns > 0 ? cfg_.tail_min_ns : 5 * kMs;
    const int64_t d = net_rng_.log_uniform(lo, cfg_.tail_max_ns > lo ? cfg_.tail_max_ns : lo);
    if (d > cfg_.ttl_ms * kMs) ++stats_.long_delays;
    return d;
  }
  return net_rng_.log_uniform(cfg_.delay_min_ns, cfg_.delay_max_ns);
}

bool World::link_blocked(int client, int server, int dir, int64_t* until) const {
  const int64_t u = link_down_until_[key(client, server) * 2 + static_cast<size_t>(dir)];
  if (u > now_) {
    *until = u;
    return true;
  }
  return false;
}

int World::connect(int client, int server, int64_t deadline_true, ErrorCode* why) {
  const int id = static_cast<int>(conns_.size());
  conns_.emplace_back(new SimConn());
  SimConn& c = *conns_.back();
  c.id = id;
  c.client = client;
  c.server = server;
  int64_t t = now_ + one_way_delay(true);
  int64_t until = 0;
  if (link_blocked(client, server, 0, &until) && until > now_) t = until + one_way_delay(true);
  schedule(t, Ev::kSyn, id);
  trace("conn %d c%d-s%d: connect", id, client, server);
  for (int i = 0; i < 1000000 && c.state == SimConn::State::kConnecting; ++i) {
    if (deadline_true >= 0 && now_ >= deadline_true) break;
    block(client, deadline_true);
  }
  if (c.state == SimConn::State::kOpen) return id;
  *why = c.state == SimConn::State::kConnecting ? ErrorCode::kTimeout : ErrorCode::kConnectFailed;
  // Whatever the cause (slow network, a server down), a request (a
  // release) could not reach the server now.
  unreachable_[key(client, server)] = now_;
  trace("conn %d c%d-s%d: connect %s", id, client, server,
        *why == ErrorCode::kTimeout ? "timed out" : "refused");
  client_close(id);
  return -1;
}

void World::on_syn(int id) {
  SimConn& c = conn(id);
  if (c.client_closed) return;  // the client gave up: its kernel answers with a reset
  ServerProc& s = server(c.server);
  bool accepted = s.state != ServerProc::State::kDown;
  if (accepted) {
    // A paused server's kernel still accepts; the process sees it later.
    s.core->open(id);
    c.server_side = true;
  }
  int64_t t = now_ + one_way_delay(false);
  int64_t until = 0;
  if (link_blocked(c.client, c.server, 1, &until)) t = until + one_way_delay(false);
  schedule(t, Ev::kSynAck, id, accepted ? 1 : 0);
}

void World::on_syn_ack(int id, bool accepted) {
  SimConn& c = conn(id);
  if (c.state != SimConn::State::kConnecting) return;
  if (c.client_closed) {
    if (accepted && c.server_side) {
      Chunk fin;
      fin.fin = true;
      fin.ready_at = now_ + one_way_delay(true);
      push(c, 0, std::move(fin));
    }
    return;
  }
  c.state = accepted && c.server_side ? SimConn::State::kOpen : SimConn::State::kRefused;
  trace("conn %d c%d-s%d: %s", id, c.client, c.server,
        c.state == SimConn::State::kOpen ? "connected" : "refused");
  wake(c.client);
}

void World::client_close(int id) {
  SimConn& c = conn(id);
  if (c.client_closed) return;
  c.client_closed = true;
  c.closed_at = now_;
  bool unexecuted = !c.c2s.q.empty() || c.delivered > c.consumed;
  for (const auto& p : server(c.server).pending) unexecuted = unexecuted || p.first == id;
  if (unexecuted) abandoned_[key(c.client, c.server)].push_back(now_);
  if (unexecuted || !c.s2c.q.empty()) timed_out_[key(c.client, c.server)].push_back(now_);
  c.rx.clear();
  c.s2c.q.clear();
  if (c.state == SimConn::State::kOpen && c.server_side) {
    Chunk fin;
    fin.fin = true;
    fin.ready_at = now_ + one_way_delay(true);
    push(c, 0, std::move(fin));
  }
  trace("conn %d c%d-s%d: closed by client", id, c.client, c.server);
}

void World::client_send(int id, const uint8_t* data, size_t n) {
  SimConn& c = conn(id);
  if (c.state != SimConn::State::kOpen || c.client_closed)
    model_fail("send on a connection not open");
  c.sent += n;
  trace("conn %d c%d>s%d: %s", id, c.client, c.server, requests_summary(data, n).c_str());
  Chunk ch;
  checker_->on_client_send(c.client, c.server, id,
                           std::string(reinterpret_cast<const char*>(data), n));
  ch.bytes.assign(reinterpret_cast<const char*>(data), n);
  ch.ready_at = now_ + one_way_delay(true);
  // Now and then a request arrives in two pieces (the server must wait).
  if (n > 8 && net_rng_.chance(0.02)) {
    const size_t cut = 1 + static_cast<size_t>(net_rng_.uniform(0, static_cast<int64_t>(n) - 2));
    Chunk rest;
    rest.bytes = ch.bytes.substr(cut);
    ch.bytes.resize(cut);
    rest.ready_at = ch.ready_at + net_rng_.uniform(0, 200000);
    push(c, 0, std::move(ch));
    push(c, 0, std::move(rest));
    return;
  }
  push(c, 0, std::move(ch));
}

void World::push(SimConn& c, int dir, Chunk chunk) {
  Pipe& p = dir == 0 ? c.c2s : c.s2c;
  p.q.push_back(std::move(chunk));
  if (!p.pump_scheduled) {
    p.pump_scheduled = true;
    schedule(p.q.front().ready_at, Ev::kPump, c.id, dir);
  }
}

void World::pump(int id, int dir) {
  SimConn& c = conn(id);
  Pipe& p = dir == 0 ? c.c2s : c.s2c;
  p.pump_scheduled = false;
  while (!p.q.empty()) {
    if (p.q.front().ready_at > now_) {
      p.pump_scheduled = true;
      schedule(p.q.front().ready_at, Ev::kPump, id, dir);
      return;
    }
    int64_t until = 0;
    if (link_blocked(c.client, c.server, dir, &until)) {
      p.pump_scheduled = true;
      schedule(until + cfg_.delay_min_ns, Ev::kPump, id, dir);
      return;
    }
    Chunk ch = std::move(p.q.front());
    p.q.pop_front();
    if (dir == 0) {
      deliver_to_server(c, ch);
    } else {
      deliver_to_client(c, ch);
    }
  }
}

void World::settle(SimConn& c, uint64_t n) { c.settled += n; }

std::vector<std::pair<int, uint64_t>> World::unsettled(int client, int server) const {
  std::vector<std::pair<int, uint64_t>> out;
  for (const auto& p : conns_) {
    if (p->client == client && p->server == server && p->settled < p->sent)
      out.emplace_back(p->id, p->sent);
  }
  return out;
}

void World::deliver_to_server(SimConn& c, Chunk& ch) {
  ServerProc& s = server(c.server);
  if (!c.server_side) {
    settle(c, ch.bytes.size());
    return;
  }
  if (!ch.fin && !calm_ && cfg_.p_reset_before > 0 && net_rng_.chance(cfg_.p_reset_before)) {
    trace("conn %d c%d-s%d: reset (request lost)", c.id, c.client, c.server);
    settle(c, ch.bytes.size());
    reset_conn(c, now_ + one_way_delay(false));
    return;
  }
  if (s.state == ServerProc::State::kPaused) {
    s.pending.emplace_back(c.id, std::move(ch));
    return;
  }
  if (ch.fin) {
    settle(c, c.delivered - c.consumed);
    c.consumed = c.delivered;
    s.core->close(c.id);
    c.server_side = false;
    return;
  }
  c.delivered += ch.bytes.size();
  server_input(s, c, ch.bytes);
}

void World::deliver_to_client(SimConn& c, Chunk& ch) {
  if (c.client_closed || c.state != SimConn::State::kOpen) return;
  if (ch.fin) {
    c.server_fin = true;
  } else {
    c.rx.append(ch.bytes);
    if (ch.busy) checker_->on_busy_reply(c.client);
  }
  wake(c.client);
}

void World::drop_pipe(SimConn& c, Pipe& p, bool to_server) {
  if (to_server) {
    for (const Chunk& ch : p.q) settle(c, ch.bytes.size());
  }
  p.q.clear();
}

void World::reset_conn(SimConn& c, int64_t client_sees_at) {
  ++stats_.resets;
  drop_pipe(c, c.c2s, true);
  drop_pipe(c, c.s2c, false);
  if (c.server_side) {
    settle(c, c.delivered - c.consumed);
    c.consumed = c.delivered;
    server(c.server).core->close(c.id);
    c.server_side = false;
  }
  ServerProc& s = server(c.server);
  for (auto it = s.pending.begin(); it != s.pending.end();) {
    if (it->first == c.id) {
      settle(c, it->second.bytes.size());
      it = s.pending.erase(it);
    } else {
      ++it;
    }
  }
  unreachable_[key(c.client, c.server)] = now_;
  schedule(client_sees_at, Ev::kResetArrive, c.id);
}

}  // namespace sim
}  // namespace edgelock
