// The scheduler: one event queue in true time; client fibers resumed when
// their wait may be over; the checker after every event; the trace.
#include "world/world.h"

#include <cstdarg>
#include <cstdio>

#include "model/fail.h"
#include "world/checker.h"

namespace edgelock {
namespace sim {

namespace {
constexpr int64_t kMs = 1000000;
constexpr size_t kTailLines = 400;
// Resumes of one client at one instant before it counts as spinning.
constexpr uint64_t kSpinLimit = 20000;
}  // namespace

TimePoint SimClock::now() { return TimePoint(Nanos(world_->local_now(client_))); }

void SimClock::sleep_for(Nanos d) { world_->sleep_local(client_, d.count()); }

World::World(const RunConfig& cfg, std::vector<Fiber*> fibers)
    : cfg_(cfg), net_rng_(stream_seed(cfg.seed, 2)), fault_rng_(stream_seed(cfg.seed, 3)) {
  Prng setup(stream_seed(cfg.seed, 4));
  servers_.resize(static_cast<size_t>(cfg.servers));
  for (int i = 0; i < cfg.servers; ++i) {
    ServerProc& s = servers_[static_cast<size_t>(i)];
    s.id = i;
    // Unix time in ns, a different offset and rate per server.
    s.clock.offset_ns = 1700000000LL * 1000000000LL + setup.uniform(0, 1000LL * kMs);
    s.clock.ppm = setup.uniform(-cfg.ppm_max, cfg.ppm_max);
  }
  clients_.resize(static_cast<size_t>(cfg.clients));
  for (int i = 0; i < cfg.clients; ++i) {
    ClientProc& c = clients_[static_cast<size_t>(i)];
    c.id = i;
    c.clock.offset_ns = setup.uniform(1, 1000000) * kMs;  // boot time: any
    c.clock.ppm = setup.uniform(-cfg.ppm_max, cfg.ppm_max);
    c.sim_clock.reset(new SimClock(this, i));
    c.fiber = fibers[static_cast<size_t>(i)];
    client_rng_.emplace_back(stream_seed(cfg.seed, 100 + static_cast<uint64_t>(i)));
  }
  const size_t links = static_cast<size_t>(cfg.clients) * static_cast<size_t>(cfg.servers);
  link_down_until_.assign(links * 2, -1);
  unreachable_.assign(links, -1);
  abandoned_.assign(links, {});
  timed_out_.assign(links, {});
  checker_.reset(new Checker(*this));
  init_servers();
}

void World::schedule(int64_t t, Ev kind, int a, int b, int64_t c) {
  Event e;
  e.t = t < now_ ? now_ : t;
  e.seq = seq_++;
  e.kind = kind;
  e.a = a;
  e.b = b;
  e.c = c;
  events_.push(e);
}

void World::trace(const char* fmt, ...) {
  char line[512];
  const int head = std::snprintf(line, sizeof line, "%10.3f ", static_cast<double>(now_) / 1e6);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line + head, sizeof line - static_cast<size_t>(head), fmt, ap);
  va_end(ap);
  for (const char* p = line; *p; ++p) {
    hash_ ^= static_cast<uint8_t>(*p);
    hash_ *= 1099511628211ull;
  }
  hash_ ^= '\n';
  hash_ *= 1099511628211ull;
  if (cfg_.print_trace) std::printf("%s\n", line);
  tail_.emplace_back(line);
  if (tail_.size() > kTailLines) tail_.pop_front();
}

int World::current_client() const {
  const Fiber* f = Fiber::current();
  for (const ClientProc& c : clients_) {
    if (c.fiber == f) return c.id;
  }
  model_fail("library code ran outside a client fiber");
}

void World::block(int client, int64_t until) {
  ClientProc& c = clients_[static_cast<size_t>(client)];
  if (Fiber::current() != c.fiber) model_fail("client %d blocked from another context", client);
  ++c.wait_gen;
  c.blocked = true;
  if (c.dies_at >= 0 && (until < 0 || until > c.dies_at)) until = c.dies_at;
  if (until >= 0) schedule(until, Ev::kWake, client, 0, static_cast<int64_t>(c.wait_gen));
  c.fiber->yield();
  c.blocked = false;
  if (c.dies_at >= 0 && now_ >= c.dies_at) die(client);
}

void World::die(int client) {
  ClientProc& c = clients_[static_cast<size_t>(client)];
  c.dies_at = -1;
  c.dead = true;
  trace("c%d died", client);
  for (auto& p : conns_) {
    if (p->client == client && !p->client_closed) client_close(p->id);
  }
  checker_->died(client);
}

void World::wake(int client) {
  ClientProc& c = clients_[static_cast<size_t>(client)];
  if (c.blocked) schedule(now_, Ev::kWake, client, 0, static_cast<int64_t>(c.wait_gen));
}

void World::sleep_local(int client, int64_t d_ns) {
  if (d_ns <= 0) return;
  const int64_t until_local = local_now(client) + d_ns;
  const int64_t until = true_at_local(client, until_local);
  for (int i = 0; i < 1000000 && local_now(client) < until_local; ++i) block(client, until);
}

void World::resume(int client) {
  ClientProc& c = clients_[static_cast<size_t>(client)];
  if (c.finished || !c.blocked) return;
  if (c.paused) {
    c.wake_pending = true;
    return;
  }
  if (c.last_resume_t == now_) {
    if (++c.steps_at_instant > kSpinLimit) {
      checker_->violation("spin", "client %d resumed %llu times without time moving (busy loop)",
                          client, static_cast<unsigned long long>(c.steps_at_instant));
      return;
    }
  } else {
    c.last_resume_t = now_;
    c.steps_at_instant = 0;
  }
  c.fiber->resume();
  if (c.fiber->finished() && !c.finished) {
    c.finished = true;
    trace("c%d finished", client);
  }
}

void World::dispatch(const Event& e) {
  switch (e.kind) {
    case Ev::kWake:
      if (static_cast<uint64_t>(e.c) == clients_[static_cast<size_t>(e.a)].wait_gen) resume(e.a);
      break;
    case Ev::kPump: pump(e.a, e.b); break;
    case Ev::kSyn: on_syn(e.a); break;
    case Ev::kSynAck: on_syn_ack(e.a, e.b != 0); break;
    case Ev::kResetArrive: {
      SimConn& c = conn(e.a);
      if (!c.client_closed && c.state != SimConn::State::kReset) {
        c.state = SimConn::State::kReset;
        c.rx.clear();
        trace("conn %d c%d-s%d: reset seen by client", c.id, c.client, c.server);
        wake(c.client);
      }
      break;
    }
    case Ev::kServerTimer: server_timer(e.a); break;
    case Ev::kFaultStart: fault_start(e.a); break;
    case Ev::kFaultEnd: fault_end(e.a); break;
    case Ev::kCalm:
      calm_ = true;
      trace("calm: faults stop");
      break;
    case Ev::kStop:
      stopping_ = true;
      trace("stop: workloads end their cycle");
      for (const ClientProc& c : clients_) wake(c.id);
      break;
  }
}

namespace {

struct FiberArg {
  World* world;
  int client;
  void (*main)(World&, int);
};

void fiber_body(void* p) {
  FiberArg* a = static_cast<FiberArg*>(p);
  a->main(*a->world, a->client);
}

}  // namespace

bool World::run(void (*client_main)(World&, int)) {
  client_main_ = client_main;
  trace("%s", cfg_.describe().c_str());
  std::vector<FiberArg> args(clients_.size());
  for (ClientProc& c : clients_) {
    args[static_cast<size_t>(c.id)] = FiberArg{this, c.id, client_main};
    c.fiber->start(&fiber_body, &args[static_cast<size_t>(c.id)]);
    c.blocked = true;  // started by its first wake
    schedule(static_cast<int64_t>(c.id) * 100000, Ev::kWake, c.id, 0, 0);
  }
  plan_faults();
  // Faults stop once the last one has ended (a restart may run past the
  // fault phase); the calm phase and the limit move with it.
  calm_at_ = cfg_.fault_phase_ns;
  for (const Fault& f : faults_) calm_at_ = f.end > calm_at_ ? f.end : calm_at_;
  const int64_t shift = calm_at_ - cfg_.fault_phase_ns;
  schedule(calm_at_, Ev::kCalm);
  schedule(cfg_.stop_at_ns + shift, Ev::kStop);
  limit_at_ = cfg_.limit_ns + shift;
  while (!events_.empty() && !checker_->failed()) {
    const Event e = events_.top();
    events_.pop();
    if (e.t > limit_at_) break;
    now_ = e.t;
    ++stats_.events;
    dispatch(e);
    for (const ServerProc& s : servers_) check_server_timer(s);
    checker_->after_event();
  }
  stats_.sim_ns = now_;
  if (!checker_->failed()) checker_->at_end();
  // A fiber left blocked (violation, limit) is abandoned mid-call: its stack
  // is reused by the next run's start().
  return !checker_->failed();
}

}  // namespace sim
}  // namespace edgelock
