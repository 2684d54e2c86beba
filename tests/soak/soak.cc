// Soak / safety checker: K processes contend on one key of a real
// redis-server while a seeded random fault schedule runs: server kill -9 +
// restart (AOF appendfsync always), server SIGSTOP/SIGCONT, worker
// SIGSTOP past the TTL, CLIENT KILL, SCRIPT FLUSH, CLIENT PAUSE, DEBUG SLEEP
// (the server busy in a command). Every grant does a
// read-modify-write on a fenced resource; the checker then reports
// overlapping validity windows, stale fences accepted, lost updates and
// calls that overran their deadline. --unsafe is the control run (resource
// ignores fences, workers ignore validity): the checker must catch it.
// Workers also pause past their lease now and then on their own (1 grant in
// 200), so the unsafe run has something to get wrong.
//
//   soak [--servers 1|3|5] [--procs 8] [--grants 20000] [--ttl 200] [--seed N] [--fault-ms 40]
//        [--ignore-fence] [--ignore-validity] [--unsafe (= both)]
//        [--expect-violations]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/redis_server.h"
#include "edgelock/edgelock.h"
#include "soak_history.h"

namespace edgelock {
namespace soak {
namespace {

struct Args {
  int procs = 8;
  uint64_t grants = 20000;
  int64_t ttl_ms = 200;
  uint64_t seed = 0;
  int fault_ms = 40;
  int servers = 1;               ///< 1: Lock on one server; 3 or 5: QuorumLock
  bool ignore_fence = false;     ///< unsafe: the resource accepts any fence
  bool ignore_validity = false;  ///< unsafe: workers write without held()
  bool expect_violations = false;
};

constexpr int64_t kCommandMs = 100;
constexpr int64_t kWaitMs = 2000;
constexpr int64_t kSlackMs = 50;   // scheduling slack on a loaded 2-core box
constexpr int64_t kServerMs = 50;  // quorum: budget of one round per server

// Shared-memory records keep monotonic ns as plain integers.
int64_t mono() { return SystemClock().now().time_since_epoch().count(); }
int64_t ns(Nanos d) { return d.count(); }

ConnectionOptions conn_options() {
  ConnectionOptions o;
  o.connect_timeout = Millis(kCommandMs) * test::slowdown();
  o.command_timeout = Millis(kCommandMs) * test::slowdown();
  o.reconnect_min = Millis(5);
  o.reconnect_max = Millis(50);
  return o;
}

// The grant loop, for Lock and QuorumLock alike.
template <typename L>
int grant_loop(int id, L& lock, const Args& a, Shared& sh, Nanos call_budget) {
  Prng rng(a.seed * 1000003 + static_cast<uint64_t>(id) + 1);
  const int64_t acquire_budget = ns(Millis(kWaitMs + kSlackMs) * test::slowdown() + call_budget);
  const int64_t release_budget = ns(Millis(kSlackMs) * test::slowdown() + call_budget);
  while (sh.grants.load() < sh.max_grants) {
    uint32_t stops = sh.stops[id].load();
    int64_t t0 = mono();
    const Status s = lock.acquire(Millis(kWaitMs));
    int64_t took = mono() - t0;  // read the clock before checking for a stop
    if (stops == sh.stops[id].load()) record_call(sh, 0, took, acquire_budget);
    if (!s.ok()) {
      sh.errors.fetch_add(1);
      // Still holding after a lost release reply: free it before retrying.
      if (s.code() == ErrorCode::kInvalidArgument) lock.release().ignore();
      SystemClock().sleep_for(Millis(1));
      continue;
    }
    const int64_t now = mono();
    Grant* g = record_grant(sh);
    if (g) *g = Grant{id, lock.fence(), now, now + ns(lock.remaining()), 0};
    int64_t v = 0;
    if ((a.ignore_validity || lock.held()) && resource_begin(sh, id, lock.fence(), &v)) {
      // Work, and now and then a pause past the lease (a GC pause, a
      // swapped-out process): the write after it must not land.
      const int64_t r = rng.uniform(0, 199);
      // Past the lease by more than the lateness of a BLPOP timeout on a
      // quiet server (its timer runs at `hz`, 100 here), so a waiter has
      // been granted by the time the late write comes.
      if (r == 0) SystemClock().sleep_for(Millis(a.ttl_ms + 50));
      if (r < 12) SystemClock().sleep_for(Millis(rng.uniform(1, 3)));
      if (a.ignore_validity || lock.held()) resource_commit(sh, id, lock.fence(), v + 1, mono());
    }
    if (g) g->released = mono();
    stops = sh.stops[id].load();
    t0 = mono();
    lock.release().ignore();  // may fail under faults; the TTL frees the key
    took = mono() - t0;
    if (stops == sh.stops[id].load()) record_call(sh, 1, took, release_budget);
  }
  return 0;
}

int worker(int id, const std::vector<std::string>& urls, const Args& a, Shared& sh) {
  static Connection conns[kMaxQuorumServers];
  for (size_t i = 0; i < urls.size(); ++i) {
    if (!conns[i].init(urls[i].c_str(), conn_options()).ok()) return 10;
  }
  if (urls.size() == 1) {
    Lock lock(conns[0]);
    LockOptions lo;
    lo.ttl = Millis(a.ttl_ms);
    lo.retry_min = Millis(1);
    lo.retry_max = Millis(20);
    if (!lock.init(Bytes::from_cstr("soak"), lo).ok()) return 11;
    return grant_loop(id, lock, a, sh, Millis(kCommandMs) * test::slowdown());
  }
  static QuorumLock lock;
  Connection* ptrs[kMaxQuorumServers];
  for (size_t i = 0; i < urls.size(); ++i) ptrs[i] = &conns[i];
  QuorumOptions qo;
  qo.ttl = Millis(a.ttl_ms);
  qo.server_timeout = Millis(kServerMs) * test::slowdown();
  qo.retry_min = Millis(1);
  qo.retry_max = Millis(20);
  qo.down_min = Millis(20);
  qo.down_max = Millis(200);
  if (!lock.init(ptrs, urls.size(), Bytes::from_cstr("soak"), qo).ok()) return 11;
  return grant_loop(id, lock, a, sh, 2 * qo.server_timeout);
}

void admin(test::RedisServer& server, std::initializer_list<const char*> args) {
  Connection c;
  ConnectionOptions o;
  o.connect_timeout = Millis(200);
  o.command_timeout = Millis(200);
  if (!c.init(server.url().c_str(), o).ok()) return;
  Bytes argv[8];
  size_t n = 0;
  for (const char* x : args) argv[n++] = Bytes::from_cstr(x);
  c.command({argv, n}, Deadline::after(c.clock(), Millis(200))).status().ignore();
}

void sleep_ms(int64_t ms) { SystemClock().sleep_for(Millis(ms)); }

// One random fault; returns its name for the schedule log.
const char* inject(Prng& rng, std::vector<std::unique_ptr<test::RedisServer>>& servers,
                   const std::vector<pid_t>& pids, Shared& sh, const Args& a) {
  test::RedisServer& server =
      *servers[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(servers.size()) - 1))];
  switch (rng.uniform(0, 7)) {
    case 0: {
      server.pause();
      sleep_ms(rng.uniform(20, 2 * a.ttl_ms));
      server.resume();
      return "server-sigstop";
    }
    case 1:
      if (!server.restart()) std::fprintf(stderr, "soak: restart failed\n");
      return "server-kill9-restart";
    case 2: {
      const size_t i = static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(pids.size()) - 1));
      kill(pids[i], SIGSTOP);
      sleep_ms(a.ttl_ms + rng.uniform(10, a.ttl_ms));  // past its lease
      // Counted while the worker is frozen: a call it was in reads the
      // count before the stop and again after SIGCONT, so it sees the
      // change and is not judged against its deadline. (Counted before
      // SIGSTOP, a call starting between the two would read the new count
      // both times and be charged the whole stop.)
      sh.stops[i].fetch_add(1);
      kill(pids[i], SIGCONT);
      return "client-sigstop";
    }
    case 3: admin(server, {"CLIENT", "KILL", "TYPE", "normal"}); return "client-kill";
    case 4: admin(server, {"SCRIPT", "FLUSH"}); return "script-flush";
    case 5: {
      const std::string ms = std::to_string(rng.uniform(20, 2 * a.ttl_ms));
      admin(server, {"CLIENT", "PAUSE", ms.c_str()});
      return "client-pause";
    }
    case 6: {
      // The server stuck in one command: nothing else runs meanwhile.
      char secs[16];
      std::snprintf(secs, sizeof secs, "%.3f",
                    static_cast<double>(rng.uniform(20, a.ttl_ms)) / 1000.0);
      admin(server, {"DEBUG", "SLEEP", secs});
      return "debug-sleep";
    }
    default: return "none";  // a quiet spell
  }
}

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "0";
    if (k == "--unsafe") a->ignore_fence = a->ignore_validity = true;
    else if (k == "--ignore-fence") a->ignore_fence = true;
    else if (k == "--ignore-validity") a->ignore_validity = true;
    else if (k == "--expect-violations") a->expect_violations = true;
    else if (k == "--procs") a->procs = std::atoi(v), ++i;
    else if (k == "--grants") a->grants = std::strtoull(v, nullptr, 10), ++i;
    else if (k == "--ttl") a->ttl_ms = std::atoll(v), ++i;
    else if (k == "--seed") a->seed = std::strtoull(v, nullptr, 10), ++i;
    else if (k == "--fault-ms") a->fault_ms = std::atoi(v), ++i;
    else if (k == "--servers") a->servers = std::atoi(v), ++i;
    else return false;
  }
  return a->procs >= 1 && a->procs <= 64 && a->grants > 0 && a->ttl_ms >= 20 && a->servers >= 1 &&
         static_cast<size_t>(a->servers) <= kMaxQuorumServers;
}

}  // namespace

int run(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(
        stderr,
        "usage: soak [--servers N] [--procs N] [--grants N] [--ttl ms] [--seed N] [--fault-ms N] "
        "[--ignore-fence] [--ignore-validity] [--unsafe] [--expect-violations]\n");
    return 2;
  }
  test::exit_unless_server();
  if (a.seed == 0)
    a.seed = static_cast<uint64_t>(std::time(nullptr)) ^ static_cast<uint64_t>(getpid());
  std::printf(
      "soak: seed %llu (replay with --seed %llu), %d server(s), %d procs, %llu grants, "
      "ttl %lld ms%s\n",
      static_cast<unsigned long long>(a.seed), static_cast<unsigned long long>(a.seed), a.servers,
      a.procs, static_cast<unsigned long long>(a.grants), static_cast<long long>(a.ttl_ms),
      a.ignore_fence ? (a.ignore_validity ? ", UNSAFE control: fences and validity ignored"
                                          : ", UNSAFE: fences ignored")
                     : (a.ignore_validity ? ", validity ignored (fences only)" : ""));
  std::fflush(stdout);
  std::vector<std::unique_ptr<test::RedisServer>> servers;
  std::vector<std::string> urls;
  for (int i = 0; i < a.servers; ++i) {
    servers.emplace_back(new test::RedisServer({"--appendonly", "yes", "--appendfsync", "always",
                                                "--enable-debug-command", "local", "--hz", "100"}));
    if (!servers.back()->start()) return 3;
    urls.push_back(servers.back()->url());
  }
  Shared* sh = create_shared(a.grants, a.ignore_fence);
  if (!sh) return 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < a.procs; ++i) {
    const pid_t p = fork();
    if (p == 0) _exit(worker(i, urls, a, *sh));
    pids.push_back(p);
  }
  Prng rng(a.seed);
  constexpr int kKinds = 8;
  int counts[kKinds] = {};
  // Host scheduling stalls (a 1 ms sleep that wakes late), for judging
  // deadline overruns on a shared, loaded machine.
  std::atomic<bool> done{false};
  std::atomic<int64_t> worst_stall{0};
  std::atomic<uint32_t> stalls{0};
  std::thread canary([&] {
    while (!done) {
      const int64_t before = mono();
      sleep_ms(1);
      const int64_t late = mono() - before - ns(Millis(1));
      if (late > ns(Millis(kSlackMs))) stalls.fetch_add(1);
      if (late > worst_stall) worst_stall = late;
    }
  });
  const int64_t t0 = mono();
  // Bounded: ends when the workers have their grants, or after 20 minutes.
  while (sh->grants.load() < a.grants && mono() - t0 < ns(Millis(20 * 60 * 1000))) {
    const int64_t next = mono() + ns(Millis(rng.uniform(a.fault_ms / 2, a.fault_ms * 3 / 2)));
    while (mono() < next && sh->grants.load() < a.grants) sleep_ms(5);
    if (sh->grants.load() >= a.grants) break;
    const char* f = inject(rng, servers, pids, *sh, a);
    for (int k = 0; k < kKinds; ++k) {
      static const char* names[kKinds] = {
          "server-sigstop", "server-kill9-restart", "client-sigstop", "client-kill",
          "script-flush",   "client-pause",         "debug-sleep",    "none"};
      if (std::strcmp(f, names[k]) == 0) ++counts[k];
    }
  }
  for (pid_t p : pids) kill(p, SIGCONT);
  done = true;
  canary.join();
  int bad_exit = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    bad_exit += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const double secs = static_cast<double>(mono() - t0) / 1e9;
  const Verdict v = check_history(*sh);
  std::printf(
      "soak: faults: server-sigstop %d, kill9-restart %d, client-sigstop %d, client-kill %d, "
      "script-flush %d, client-pause %d, debug-sleep %d\n",
      counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6]);
  std::printf(
      "soak: %llu grants in %.1f s, %llu failed attempts, %llu stale writes rejected, "
      "slowest call %.1f ms\n",
      static_cast<unsigned long long>(v.grants), secs,
      static_cast<unsigned long long>(sh->errors.load()),
      static_cast<unsigned long long>(v.rejected), static_cast<double>(sh->slowest_ns) / 1e6);
  std::printf(
      "soak: violations %llu (overlapping validity %llu, stale fences accepted %llu, lost "
      "updates %llu, deadline overruns %llu), seed %llu\n",
      static_cast<unsigned long long>(v.violations()), static_cast<unsigned long long>(v.overlaps),
      static_cast<unsigned long long>(v.stale_accepted),
      static_cast<unsigned long long>(v.lost_updates), static_cast<unsigned long long>(v.overruns),
      static_cast<unsigned long long>(a.seed));
  std::printf(
      "soak: host scheduling: %u stalls over %lld ms, worst %.1f ms (a 1 ms sleep's lateness)\n",
      stalls.load(), static_cast<long long>(kSlackMs), static_cast<double>(worst_stall) / 1e6);
  if (v.overruns) {
    std::printf("soak: worst overrun %.1f ms past its budget (last overrun: %s)\n",
                static_cast<double>(sh->worst_over_ns) / 1e6,
                sh->worst_over_kind == 0 ? "acquire" : "release");
  }
  if (bad_exit) std::printf("soak: %d workers exited abnormally\n", bad_exit);
  if (a.expect_violations) {
    std::printf("soak: control run %s\n",
                v.violations() > 0 ? "caught (as it must be)" : "NOT caught");
    return v.violations() > 0 ? 0 : 1;
  }
  return v.violations() == 0 && bad_exit == 0 ? 0 : 1;
}

}  // namespace soak
}  // namespace edgelock

int main(int argc, char** argv) { return edgelock::soak::run(argc, argv); }
