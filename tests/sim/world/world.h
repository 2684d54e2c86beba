#pragma once
// The simulated world: client processes (fibers running the real library),
// Redis servers (ServerCore on their own clocks), the network between them
// (per-connection FIFO byte pipes with seeded delays, partitions and
// resets), faults, one event queue in true time, and a trace whose hash
// identifies the run. Single-threaded and deterministic: the same seed gives
// the same trace, byte for byte. See docs/simulation.md.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "edgelock/status.h"
#include "model/server_core.h"
#include "world/fiber.h"
#include "world/prng.h"
#include "world/run_config.h"
#include "world/sim_clock.h"

namespace edgelock {
namespace sim {

class Checker;
class ServerSink;

enum class Ev : uint8_t {
  kWake,         // a client's blocking wait may be over (a = client, c = wait generation)
  kPump,         // the head of a pipe may be delivered (a = conn, b = 0: to server, 1: to client)
  kSyn,          // a connection request reaches its server (a = conn)
  kSynAck,       // the answer reaches the client (a = conn, b = 1 accepted, 0 refused)
  kResetArrive,  // a reset reaches the client side (a = conn)
  kServerTimer,  // blocking-command timeouts of a server (a = server)
  kFaultStart,   // a = fault index
  kFaultEnd,     // a = fault index
  kCalm,         // faults stop
  kStop,         // workloads finish their current cycle and end
};

struct Event {
  int64_t t = 0;
  uint64_t seq = 0;
  Ev kind = Ev::kWake;
  int a = 0;
  int b = 0;
  int64_t c = 0;
};

struct EventLater {
  bool operator()(const Event& x, const Event& y) const {
    return x.t != y.t ? x.t > y.t : x.seq > y.seq;
  }
};

struct Chunk {
  std::string bytes;
  int64_t ready_at = 0;
  bool fin = false;   // the client closed the stream after these bytes
  bool busy = false;  // a busy reply to an acquire (polling check)
};

struct Pipe {
  std::deque<Chunk> q;
  bool pump_scheduled = false;
  int64_t last_ready = 0;
};

struct SimConn {
  enum class State : uint8_t { kConnecting, kOpen, kRefused, kReset };
  int id = 0;
  int client = 0;
  int server = 0;
  State state = State::kConnecting;
  bool client_closed = false;  // the client closed it (FIN follows its bytes)
  int64_t closed_at = -1;      // when
  bool server_side = false;    // the server process has it open
  bool server_fin = false;     // the server closed it (restart): EOF after rx
  std::string rx;              // received, not yet read by the client
  Pipe c2s, s2c;
  uint64_t delivered = 0;  // bytes handed to the server process
  uint64_t consumed = 0;   // of those, parsed as requests
  uint64_t sent = 0;       // bytes the client wrote
  uint64_t settled = 0;    // of those, parsed by the server or lost
};

enum class FaultKind : uint8_t {
  kPartition,      // a = client, b = server, c = 1: to server, 2: to client, 3: both
  kServerPause,    // a = server (SIGSTOP .. SIGCONT)
  kServerRestart,  // a = server; c = 1: data lost
  kClientPause,    // a = client (the process frozen)
  kScriptFlush,    // a = server
  kErrorReplies,   // a = server, c = which error
  kRogueHolder,    // the lock key held without a TTL by something else (every server)
};

struct Fault {
  FaultKind kind;
  int a = 0;
  int b = 0;
  int c = 0;
  int64_t start = 0;
  int64_t end = 0;
};

struct ServerProc {
  enum class State : uint8_t { kUp, kPaused, kDown };
  int id = 0;
  ClockRate clock;
  State state = State::kUp;
  std::unique_ptr<ServerCore> core;
  std::deque<std::pair<int, Chunk>> pending;  // arrived while paused
  int error_mode = 0;                         // 0 none, else an injected error
  int64_t timer_at = -1;                      // scheduled kServerTimer
  uint32_t restarts = 0;
  // While down after a crash that lost the data: what it held. Nothing can
  // be granted there until it is back, so until then leases on it count as
  // held (the checker's view); back up, it holds nothing.
  std::unique_ptr<Keyspace> lost;
};

struct ClientProc {
  int id = 0;
  ClockRate clock;
  std::unique_ptr<SimClock> sim_clock;
  Fiber* fiber = nullptr;
  bool blocked = false;
  bool finished = false;
  uint64_t wait_gen = 0;
  bool paused = false;
  uint32_t pause_count = 0;  // pauses begun (a call that spans one is late by design)
  bool wake_pending = false;
  uint64_t steps_at_instant = 0;  // resumes without time moving (spin guard)
  int64_t last_resume_t = -1;
  int64_t dies_at = -1;  // the process dies at its first wait past this true time
  bool dead = false;     // died: its sockets are closed, nothing it sends arrives
};

/// Counters of one run (summed over runs for the report).
struct RunStats {
  uint64_t events = 0;
  uint64_t requests = 0;
  uint64_t faults[8] = {};       // by FaultKind
  uint64_t resets = 0;           // connection resets injected
  uint64_t long_delays = 0;      // messages delayed past the TTL
  uint64_t server_timeouts = 0;  // blocked BLPOP/WAIT timed out by a server
  uint64_t grants = 0;           // acquire/enter/take ok (workloads)
  uint64_t holder_crashes = 0;   // quorum holders dead right after a grant (workloads)
  uint64_t waiter_crashes = 0;   // FairLock waiters dead mid-wait (workloads)
  uint64_t waiter_freezes = 0;   // FairLock waiters frozen past their waiter timeout
  uint64_t violations = 0;
  uint64_t excused[5] = {};        // cleanups excused, by Excuse
  uint64_t fence_regressions = 0;  // after a restart that lost the counters
  int64_t sim_ns = 0;
};

class World {
 public:
  World(const RunConfig& cfg, std::vector<Fiber*> fibers);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  /// Runs to the end; false on a violation (the checker printed it).
  bool run(void (*client_main)(World&, int client));

  // --- Called from client fibers (the library, through SimClock/SimTransport).
  int64_t local_now(int client) const { return clients_[client].clock.local(now_); }
  int64_t true_at_local(int client, int64_t local) const {
    return clients_[client].clock.true_at(local);
  }
  void sleep_local(int client, int64_t d_ns);
  /// Blocks the calling client until woken or true time `until` (-1: no
  /// timer). Spurious returns are possible: callers re-check.
  void block(int client, int64_t until);
  /// Opens a connection to `server`, blocking until it is accepted, refused
  /// or `deadline_true` passes. Returns the connection id, or -1 with *why.
  int connect(int client, int server, int64_t deadline_true, ErrorCode* why);
  void client_close(int conn);
  /// Sends bytes (always all of them: the simulated socket buffer is large).
  void client_send(int conn, const uint8_t* data, size_t n);
  SimConn& conn(int id) { return *conns_[static_cast<size_t>(id)]; }
  size_t conn_count() const { return conns_.size(); }
  int current_client() const;
  /// Freezes `client` (as a client-pause fault) over true times [start, end).
  void freeze(int client, int64_t start, int64_t end);

  // --- For workloads and the checker.
  const RunConfig& config() const { return cfg_; }
  int64_t now() const { return now_; }
  bool calm() const { return calm_; }
  /// When the last fault ends (true time).
  int64_t calm_at() const { return calm_at_; }
  bool stopping() const { return stopping_; }
  Prng& rng_for(int client) { return client_rng_[static_cast<size_t>(client)]; }
  size_t server_count() const { return servers_.size(); }
  ServerProc& server(int i) { return servers_[static_cast<size_t>(i)]; }
  const ServerProc& server(int i) const { return servers_[static_cast<size_t>(i)]; }
  ClientProc& client(int i) { return clients_[static_cast<size_t>(i)]; }
  int64_t server_us(int s, int64_t t) const {
    return servers_[static_cast<size_t>(s)].clock.local(t) / 1000;
  }
  /// The first true instant at which server s's clock reads `us`.
  int64_t true_at_server_us(int s, int64_t us) const {
    return servers_[static_cast<size_t>(s)].clock.true_at(us * 1000);
  }
  /// The connections from client c to server s with bytes not yet parsed
  /// by the server nor lost, and how many bytes each has sent so far (for
  /// "once in-flight requests settle").
  std::vector<std::pair<int, uint64_t>> unsettled(int c, int s) const;
  /// True time of the last fault on the link c-s or server s that can keep
  /// a request from being executed (partition, reset, restart), or -1.
  int64_t last_unreachable(int c, int s) const { return unreachable_[key(c, s)]; }
  /// Whether client c closed a connection to s with a request still
  /// unexecuted on it (a timed-out command) at a true time in [from, to].
  bool abandoned_between(int c, int s, int64_t from, int64_t to) const {
    return any_between(abandoned_[key(c, s)], from, to);
  }
  /// When it closed one with a request or reply still on its way (a
  /// timeout), or a connect failed: true times, oldest first.
  const std::vector<int64_t>& timed_out(int c, int s) const { return timed_out_[key(c, s)]; }
  int client_of_server_conn(int conn) const { return conns_[static_cast<size_t>(conn)]->client; }
  Checker& checker() { return *checker_; }
  /// The reply about to be sent answers an acquire with "busy".
  void tag_next_reply_busy() { next_reply_busy_ = true; }
  RunStats& stats() { return stats_; }

  /// Appends a line to the trace (hashed; the last lines are kept for a
  /// failure report).
  void trace(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  uint64_t trace_hash() const { return hash_; }
  /// The kept tail of the trace, oldest first.
  std::vector<std::string> trace_tail() const { return {tail_.begin(), tail_.end()}; }

 private:
  friend class ServerSink;
  size_t key(int c, int s) const {
    return static_cast<size_t>(c) * servers_.size() + static_cast<size_t>(s);
  }
  void schedule(int64_t t, Ev kind, int a = 0, int b = 0, int64_t c = 0);
  void dispatch(const Event& e);
  void resume(int client);
  void wake(int client);
  void wake_conn_owner(int conn);
  // The process dies (ClientProc::dies_at): the kernel closes its sockets.
  void die(int client);

  // Network (net.cc).
  int64_t one_way_delay(bool to_server);
  bool link_blocked(int client, int server, int dir, int64_t* until) const;
  void push(SimConn& c, int dir, Chunk chunk);
  void pump(int conn, int dir);
  void deliver_to_server(SimConn& c, Chunk& chunk);
  void deliver_to_client(SimConn& c, Chunk& chunk);
  void on_syn(int conn);
  void on_syn_ack(int conn, bool accepted);
  void reset_conn(SimConn& c, int64_t client_sees_at);
  void drop_pipe(SimConn& c, Pipe& p, bool to_server);
  void settle(SimConn& c, uint64_t n);

  // Servers and faults (servers.cc).
  void init_servers();
  void server_input(ServerProc& s, SimConn& c, const std::string& bytes);
  void server_timer(int server);
  void arm_server_timer(ServerProc& s);
  // Stops the run loudly unless a server with a blocked client that can
  // time out has its timer armed, not in the past, and no later than due.
  void check_server_timer(const ServerProc& s) const;
  Fault random_fault(int64_t start);
  bool still_faulted(const Fault& f) const;
  void unreachable_until(int client, int server, int64_t end);
  void start_partition(const Fault& f);
  void start_restart(const Fault& f);
  void end_client_pause(const Fault& f);
  void fault_start(int index);
  void fault_end(int index);
  void plan_faults();
  void server_crash(ServerProc& s, bool lose_data);
  void server_resume(ServerProc& s);
  void rogue(bool on);

  RunConfig cfg_;
  int64_t now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, EventLater> events_;
  std::vector<ClientProc> clients_;
  std::vector<ServerProc> servers_;
  std::vector<std::unique_ptr<SimConn>> conns_;
  std::vector<Fault> faults_;
  std::vector<Prng> client_rng_;
  Prng net_rng_;
  Prng fault_rng_;
  std::vector<int64_t> link_down_until_;  // [client][server][dir 0/1]
  mutable std::vector<int64_t> unreachable_;
  std::vector<std::vector<int64_t>> abandoned_;
  std::vector<std::vector<int64_t>> timed_out_;
  static bool any_between(const std::vector<int64_t>& v, int64_t from, int64_t to) {
    for (int64_t t : v) {
      if (t >= from && t <= to) return true;
    }
    return false;
  }
  std::unique_ptr<Checker> checker_;
  std::vector<ServerSink*> sinks_;
  bool next_reply_busy_ = false;
  void (*client_main_)(World&, int) = nullptr;
  bool calm_ = false;
  int64_t calm_at_ = 0;
  int64_t limit_at_ = 0;
  bool stopping_ = false;
  bool failed_ = false;
  RunStats stats_;
  uint64_t hash_ = 1469598103934665603ull;
  std::deque<std::string> tail_;
};

}  // namespace sim
}  // namespace edgelock
