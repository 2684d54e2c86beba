// edgelock-bench: what one lock cycle costs, and how fast a released lock
// reaches the next waiter. Prints one JSON line per run (--json).
//
//   uncontended  one process: try_acquire + release per cycle.
//   contended    --clients processes (fork) fight for one key, no hold.
//   quorum       one process, QuorumLock over every --url (if built).
//   handoff      as contended, each grant held --hold-us (default 100),
//                and a releaser steps back until another process got it:
//                handoff = next holder's grant - previous holder's release
//                call, both CLOCK_MONOTONIC, matched by fencing token; only
//                grants to another process count (stderr says how many).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>

#include "bench_util.h"
#include "edgelock/edgelock.h"

namespace {

using bench::Args;
using bench::Histogram;
using bench::now_ns;

constexpr int kRing = 1024;  // release stamps, indexed by fence % kRing

struct Stamp {
  std::atomic<uint64_t> fence{0};
  std::atomic<int64_t> released_ns{0};
  std::atomic<int> holder{-1};
};

struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> go{0};
  std::atomic<long> tickets{0};
  std::atomic<long> errors{0};
  std::atomic<uint64_t> commands{0};
  std::atomic<int64_t> start_ns{0};
  std::atomic<int64_t> end_ns{0};
  std::atomic<long> max_rss_kb{0};
  std::atomic<long> regrants{0};    // the releaser itself got the next grant
  std::atomic<uint32_t> grants{0};  // futex word: bumped on every grant
  Stamp ring[kRing];
  Histogram latency;
  Histogram handoff;
};

bool open_lock(const Args& a, edgelock::Connection& conn, edgelock::Lock& lock) {
  if (!conn.init(a.urls[0]).ok() || !conn.connect().ok()) {
    std::fprintf(stderr, "connect %s: %s\n", a.urls[0], conn.last_error());
    return false;
  }
  edgelock::LockOptions o;
  o.ttl = edgelock::Millis(a.ttl_ms);
  o.wake_on_release = !a.no_wake;
  if (!lock.init(edgelock::Bytes::from_cstr(a.key), o).ok()) return false;
  // Warm-up: the scripts get cached on the server (EVALSHA from here on).
  if (!lock.acquire(edgelock::Millis(30000)).ok() || !lock.release().ok()) {
    std::fprintf(stderr, "warm-up cycle failed: %s\n", conn.last_error());
    return false;
  }
  return true;
}

int run_uncontended(const Args& a, Shared& sh) {
  edgelock::Connection conn;
  edgelock::Lock lock(conn);
  if (!open_lock(a, conn, lock)) return 1;
  const uint32_t before = conn.stats().commands;
  const int64_t t0 = now_ns();
  for (long i = 0; i < a.cycles; ++i) {
    const int64_t c0 = now_ns();
    if (!lock.try_acquire().ok() || !lock.release().ok()) sh.errors.fetch_add(1);
    sh.latency.add(now_ns() - c0);
  }
  const double seconds = static_cast<double>(now_ns() - t0) / 1e9;
  bench::Report r;
  r.workload = "uncontended";
  r.cycles = a.cycles;
  r.seconds = seconds;
  r.latency = &sh.latency;
  r.commands_per_grant =
      static_cast<double>(conn.stats().commands - before) / static_cast<double>(a.cycles);
  r.errors = sh.errors.load();
  bench::print_report(r, a.json);
  return r.errors ? 1 : 0;
}

// Stamps the grant: the previous fence's release stamp gives the handoff.
// Only a grant to another process is a handoff; a releaser that takes the
// lock straight back (unfair, as polling waiters allow) is counted apart.
void note_grant(Shared& sh, uint64_t fence, int64_t granted_ns, int me) {
  const Stamp& prev = sh.ring[(fence - 1) % kRing];
  if (prev.fence.load(std::memory_order_acquire) != fence - 1) return;
  if (prev.holder.load(std::memory_order_relaxed) == me) {
    sh.regrants.fetch_add(1);
    return;
  }
  sh.handoff.add(granted_ns - prev.released_ns.load(std::memory_order_relaxed));
}

void note_release(Shared& sh, uint64_t fence, int me) {
  Stamp& s = sh.ring[fence % kRing];
  s.released_ns.store(now_ns(), std::memory_order_relaxed);
  s.holder.store(me, std::memory_order_relaxed);
  s.fence.store(fence, std::memory_order_release);
}

// Handoff mode: a releaser steps back until another process was granted
// (bounded: 1 s, or the run is over), so every grant is a handoff to a
// waiter and the figure shows how fast waiters learn of a release. It
// sleeps on a futex in the shared page, so it costs no CPU meanwhile.
void step_back(const Args& a, Shared& sh, uint32_t seen) {
  const int64_t until = now_ns() + 1000000000;
  for (int i = 0; i < 1000 && sh.grants.load() == seen && sh.tickets.load() < a.cycles; ++i) {
    const int64_t left = until - now_ns();
    if (left <= 0) break;
    timespec ts{0, static_cast<long>(left < 10000000 ? left : 10000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&sh.grants), FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
}

// Returns the futex word's value after this grant.
uint32_t note_granted(Shared& sh) {
  const uint32_t now = sh.grants.fetch_add(1) + 1;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&sh.grants), FUTEX_WAKE, 64, nullptr, nullptr, 0);
  return now;
}

int client(const Args& a, Shared& sh, long hold_us, int me, bool handoff) {
  edgelock::Connection conn;
  edgelock::Lock lock(conn);
  const bool ok = open_lock(a, conn, lock);
  const uint32_t before = conn.stats().commands;
  sh.ready.fetch_add(1);
  for (long spin = 0; sh.go.load() == 0 && spin < 100000000; ++spin) usleep(50);
  if (!ok) return 1;
  for (long i = 0; i < 10 * a.cycles + 1000; ++i) {
    const int64_t t0 = now_ns();
    if (!lock.acquire(edgelock::Millis(30000)).ok()) {
      sh.errors.fetch_add(1);
      break;
    }
    const int64_t granted = now_ns();
    const uint64_t fence = lock.fence();
    uint32_t after_mine = 0;
    const bool counted = sh.tickets.fetch_add(1) < a.cycles;
    if (counted) {
      sh.latency.add(granted - t0);
      note_grant(sh, fence, granted, me);
      if (handoff) after_mine = note_granted(sh);
      bench::hold_for_us(hold_us);
    }
    note_release(sh, fence, me);
    if (!lock.release().ok()) sh.errors.fetch_add(1);
    if (!counted) break;
    if (handoff) step_back(a, sh, after_mine);
  }
  sh.commands.fetch_add(conn.stats().commands - before);
  long rss = bench::own_max_rss_kb(), seen_rss = sh.max_rss_kb.load();
  while (rss > seen_rss && !sh.max_rss_kb.compare_exchange_weak(seen_rss, rss)) {
  }
  int64_t end = now_ns(), seen = sh.end_ns.load();
  while (end > seen && !sh.end_ns.compare_exchange_weak(seen, end)) {
  }
  return 0;
}

int run_processes(const Args& a, Shared& sh, long hold_us, bool handoff) {
  pid_t pids[64];
  for (int c = 0; c < a.clients; ++c) {
    pids[c] = fork();
    if (pids[c] == 0) _exit(client(a, sh, hold_us, c, handoff));
    if (pids[c] < 0) return 1;
  }
  for (long spin = 0; sh.ready.load() < a.clients && spin < 200000; ++spin) usleep(50);
  sh.start_ns = now_ns();
  sh.go = 1;
  int failed = 0;
  for (int c = 0; c < a.clients; ++c) {
    int status = 0;
    failed += waitpid(pids[c], &status, 0) != pids[c] || !WIFEXITED(status) || WEXITSTATUS(status);
  }
  bench::Report r;
  r.workload = a.workload;
  r.cycles = a.cycles;
  r.seconds = static_cast<double>(sh.end_ns.load() - sh.start_ns.load()) / 1e9;
  r.latency = &sh.latency;
  r.handoff = &sh.handoff;
  r.commands_per_grant =
      static_cast<double>(sh.commands.load()) / static_cast<double>(sh.tickets.load());
  r.errors = sh.errors.load() + failed;
  r.max_rss_kb = sh.max_rss_kb.load();
  bench::print_report(r, a.json);
  std::fprintf(stderr,
               "%ld of %ld grants went to another process (handoffs), %ld back to the releaser\n",
               static_cast<long>(sh.handoff.count()), sh.tickets.load() - 1, sh.regrants.load());
  return r.errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!bench::parse_args(argc, argv, &a, "edgelock-bench")) return 2;
  void* mem = bench::alloc_shared(sizeof(Shared));
  if (!mem) return 1;
  Shared& sh = *new (mem) Shared();
  const bool handoff = std::strcmp(a.workload, "handoff") == 0;
  if (std::strcmp(a.workload, "uncontended") == 0) return run_uncontended(a, sh);
  if (handoff || std::strcmp(a.workload, "contended") == 0) {
    return run_processes(a, sh, a.hold_us >= 0 ? a.hold_us : handoff ? 100 : 0, handoff);
  }
#ifdef EDGELOCK_BENCH_QUORUM
  if (std::strcmp(a.workload, "quorum") == 0) return bench::run_quorum(a, sh.latency);
#endif
  std::fprintf(stderr, "edgelock-bench: workload %s is not available in this build\n", a.workload);
  return 2;
}
