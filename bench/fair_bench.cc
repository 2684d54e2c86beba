// edgelock-fair-bench: the fair (FIFO) lock against the plain one in the
// same run. K processes (fork) loop acquire / hold H / release on one key
// for S seconds, once with Lock and once with FairLock (alternating
// rounds), and the report gives per mode: grants, the acquire wait
// (p50 / p99 / max), the handoff (next holder's grant - previous holder's
// release call, CLOCK_MONOTONIC, matched by fence; grants to another
// process only), grants per process (least / most), commands per grant,
// and the bound (K - 1) x (H + handoff p99) + waiter_timeout against the
// longest wait, with H the nominal hold; also the tight figure without
// the waiter timeout (no waiter dies here), with H the measured hold p99
// (sleeps overrun on a loaded machine).
//
//   edgelock-fair-bench --url URL [--clients 8] [--hold-ms 20] [--seconds 20]
//                       [--waiter-timeout-ms 2000] [--ttl-ms 10000]
//                       [--rounds 1] [--mode both|fair|plain] [--json]
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "bench_util.h"
#include "edgelock/edgelock.h"

namespace {

using bench::Histogram;
using bench::now_ns;

constexpr int kMaxClients = 64;
constexpr int kRing = 4096;  // release stamps, indexed by fence % kRing

struct Config {
  const char* url = nullptr;
  int clients = 8;
  long hold_ms = 20;
  long seconds = 20;
  long waiter_timeout_ms = 2000;
  long ttl_ms = 10000;
  int rounds = 1;
  const char* mode = "both";
  bool json = false;
};

struct Stamp {
  std::atomic<uint64_t> fence{0};
  std::atomic<int64_t> released_ns{0};
  std::atomic<int> holder{-1};
};

// One mode's run, in a MAP_SHARED page.
struct Shared {
  std::atomic<int> ready{0};
  std::atomic<int> go{0};
  std::atomic<int64_t> end_ns{0};
  std::atomic<long> errors{0};
  std::atomic<long> regrants{0};
  std::atomic<uint64_t> commands{0};
  std::atomic<int64_t> max_wait_ns{0};
  std::atomic<long> grants[kMaxClients];
  Stamp ring[kRing];
  Histogram wait;
  Histogram handoff;
  Histogram hold;
};

void raise_max(std::atomic<int64_t>& m, int64_t v) {
  int64_t seen = m.load();
  while (v > seen && !m.compare_exchange_weak(seen, v)) {
  }
}

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

void init_lock(edgelock::Lock& l, const Config& c, const char* key, edgelock::Status* s) {
  edgelock::LockOptions o;
  o.ttl = edgelock::Millis(c.ttl_ms);
  *s = l.init(edgelock::Bytes::from_cstr(key), o);
}

void init_lock(edgelock::FairLock& l, const Config& c, const char* key, edgelock::Status* s) {
  edgelock::FairLockOptions o;
  o.ttl = edgelock::Millis(c.ttl_ms);
  o.waiter_timeout = edgelock::Millis(c.waiter_timeout_ms);
  *s = l.init(edgelock::Bytes::from_cstr(key), o);
}

template <typename L>
int client(const Config& c, Shared& sh, int me, const char* key) {
  edgelock::Connection conn;
  L lock(conn);
  edgelock::Status s = conn.init(c.url);
  if (s.ok()) init_lock(lock, c, key, &s);
  // Warm-up: the scripts get cached on the server (EVALSHA from here on).
  if (s.ok()) s = lock.acquire(edgelock::Millis(30000));
  if (s.ok()) s = lock.release();
  if (!s.ok())
    std::fprintf(stderr, "client %d set-up: %s (%s)\n", me, s.to_string(), conn.last_error());
  const uint32_t before = conn.stats().commands;
  sh.ready.fetch_add(1);
  for (long spin = 0; sh.go.load() == 0 && spin < 100000000; ++spin) usleep(50);
  if (!s.ok()) return 1;
  for (long i = 0; i < 10000000 && now_ns() < sh.end_ns.load(); ++i) {
    const int64_t t0 = now_ns();
    if (!lock.acquire(edgelock::Millis(60000)).ok()) {
      sh.errors.fetch_add(1);
      break;
    }
    const int64_t granted = now_ns();
    const uint64_t fence = lock.fence();
    sh.wait.add(granted - t0);
    raise_max(sh.max_wait_ns, granted - t0);
    sh.grants[me].fetch_add(1);
    note_grant(sh, fence, granted, me);
    usleep(static_cast<useconds_t>(c.hold_ms * 1000));
    sh.hold.add(now_ns() - granted);
    note_release(sh, fence, me);
    if (!lock.release().ok()) sh.errors.fetch_add(1);
  }
  sh.commands.fetch_add(conn.stats().commands - before);
  return 0;
}

struct Figures {
  long grants = 0;
  double wait_p50_ms = 0, wait_p99_ms = 0, wait_max_ms = 0;
  double handoff_p50_us = 0, handoff_p99_us = 0;
  long least = 0, most = 0;
  double commands_per_grant = 0;
  double bound_ms = 0;
  double hold_p99_ms = 0;
  double tight_ms = 0;
  long errors = 0;
  long regrants = 0;
};

Figures run_mode(const Config& c, bool fair) {
  void* mem = bench::alloc_shared(sizeof(Shared));
  Shared& sh = *new (mem) Shared();
  const char* key = fair ? "edgelock-fair-bench:fair" : "edgelock-fair-bench:plain";
  pid_t pids[kMaxClients];
  for (int i = 0; i < c.clients; ++i) {
    std::fflush(nullptr);
    pids[i] = fork();
    if (pids[i] == 0) {
      _exit(fair ? client<edgelock::FairLock>(c, sh, i, key)
                 : client<edgelock::Lock>(c, sh, i, key));
    }
  }
  for (long spin = 0; sh.ready.load() < c.clients && spin < 600000; ++spin) usleep(50);
  sh.end_ns = now_ns() + c.seconds * 1000000000LL;
  sh.go = 1;
  long failed = 0;
  for (int i = 0; i < c.clients; ++i) {
    int status = 0;
    failed += pids[i] <= 0 || waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
              WEXITSTATUS(status) != 0;
  }
  Figures f;
  f.least = c.clients > 0 ? LONG_MAX : 0;  // long is 32 bits on armhf
  for (int i = 0; i < c.clients; ++i) {
    const long g = sh.grants[i].load();
    f.grants += g;
    f.least = g < f.least ? g : f.least;
    f.most = g > f.most ? g : f.most;
  }
  f.wait_p50_ms = static_cast<double>(sh.wait.quantile(0.50)) / 1e6;
  f.wait_p99_ms = static_cast<double>(sh.wait.quantile(0.99)) / 1e6;
  f.wait_max_ms = static_cast<double>(sh.max_wait_ns.load()) / 1e6;
  f.handoff_p50_us = static_cast<double>(sh.handoff.quantile(0.50)) / 1e3;
  f.handoff_p99_us = static_cast<double>(sh.handoff.quantile(0.99)) / 1e3;
  f.commands_per_grant =
      f.grants ? static_cast<double>(sh.commands.load()) / static_cast<double>(f.grants) : 0;
  f.bound_ms = (c.clients - 1) * (static_cast<double>(c.hold_ms) + f.handoff_p99_us / 1e3) +
               (fair ? static_cast<double>(c.waiter_timeout_ms) : 0);
  f.hold_p99_ms = static_cast<double>(sh.hold.quantile(0.99)) / 1e6;
  f.tight_ms = (c.clients - 1) * (f.hold_p99_ms + f.handoff_p99_us / 1e3);
  f.errors = sh.errors.load() + failed;
  f.regrants = sh.regrants.load();
  munmap(mem, sizeof(Shared));
  return f;
}

void print(const Config& c, const char* mode, const Figures& f) {
  if (c.json) {
    std::printf(
        "{\"mode\":\"%s\",\"clients\":%d,\"hold_ms\":%ld,\"seconds\":%ld,\"grants\":%ld,"
        "\"wait_p50_ms\":%.2f,\"wait_p99_ms\":%.2f,\"wait_max_ms\":%.2f,"
        "\"handoff_p50_us\":%.1f,\"handoff_p99_us\":%.1f,\"grants_least\":%ld,"
        "\"grants_most\":%ld,\"regrants\":%ld,\"commands_per_grant\":%.2f,"
        "\"bound_ms\":%.1f,\"within_bound\":%s,\"hold_p99_ms\":%.2f,\"tight_bound_ms\":%.1f,"
        "\"errors\":%ld}\n",
        mode, c.clients, c.hold_ms, c.seconds, f.grants, f.wait_p50_ms, f.wait_p99_ms,
        f.wait_max_ms, f.handoff_p50_us, f.handoff_p99_us, f.least, f.most, f.regrants,
        f.commands_per_grant, f.bound_ms, f.wait_max_ms <= f.bound_ms ? "true" : "false",
        f.hold_p99_ms, f.tight_ms, f.errors);
  } else {
    std::printf(
        "%-5s  grants %6ld  wait p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  handoff p50 %6.1f us"
        "  p99 %7.1f us  grants/process %ld..%ld  back to releaser %ld  commands/grant %.2f\n",
        mode, f.grants, f.wait_p50_ms, f.wait_p99_ms, f.wait_max_ms, f.handoff_p50_us,
        f.handoff_p99_us, f.least, f.most, f.regrants, f.commands_per_grant);
  }
  if (f.errors) std::fprintf(stderr, "%s: %ld errors\n", mode, f.errors);
}

bool parse(int argc, char** argv, Config* c) {
  for (int i = 1; i < argc; ++i) {
    const char* k = argv[i];
    if (!std::strcmp(k, "--json")) {
      c->json = true;
      continue;
    }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    const long n = std::strtol(v, nullptr, 10);
    if (!std::strcmp(k, "--url")) c->url = v;
    else if (!std::strcmp(k, "--clients") && n >= 2 && n <= kMaxClients)
      c->clients = static_cast<int>(n);
    else if (!std::strcmp(k, "--hold-ms") && n >= 0 && n <= 10000) c->hold_ms = n;
    else if (!std::strcmp(k, "--seconds") && n >= 1 && n <= 3600) c->seconds = n;
    else if (!std::strcmp(k, "--waiter-timeout-ms") && n >= 10) c->waiter_timeout_ms = n;
    else if (!std::strcmp(k, "--ttl-ms") && n >= 100) c->ttl_ms = n;
    else if (!std::strcmp(k, "--rounds") && n >= 1 && n <= 100) c->rounds = static_cast<int>(n);
    else if (!std::strcmp(k, "--mode") &&
             (!std::strcmp(v, "both") || !std::strcmp(v, "fair") || !std::strcmp(v, "plain")))
      c->mode = v;
    else return false;
  }
  return c->url != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  if (!parse(argc, argv, &c)) {
    std::fprintf(stderr,
                 "usage: edgelock-fair-bench --url URL [--clients 8] [--hold-ms 20] [--seconds 20]"
                 " [--waiter-timeout-ms 2000] [--ttl-ms 10000] [--rounds 1]"
                 " [--mode both|fair|plain] [--json]\n");
    return 2;
  }
  const bool plain = std::strcmp(c.mode, "fair") != 0;
  const bool fair = std::strcmp(c.mode, "plain") != 0;
  long errors = 0;
  bool within = true;
  double plain_h50 = 0, fair_h50 = 0;
  for (int r = 0; r < c.rounds; ++r) {  // alternating, so drift hits both
    if (plain) {
      const Figures f = run_mode(c, false);
      print(c, "plain", f);
      errors += f.errors;
      plain_h50 = f.handoff_p50_us;
    }
    if (fair) {
      const Figures f = run_mode(c, true);
      print(c, "fair", f);
      errors += f.errors;
      within = within && f.wait_max_ms <= f.bound_ms;
      fair_h50 = f.handoff_p50_us;
      if (!c.json) {
        std::printf(
            "fair   bound (K-1) x (H + handoff p99) + waiter_timeout = %d x (%ld ms + %.2f ms) + "
            "%ld ms"
            " = %.1f ms; longest wait %.1f ms: %s\n",
            c.clients - 1, c.hold_ms, f.handoff_p99_us / 1e3, c.waiter_timeout_ms, f.bound_ms,
            f.wait_max_ms, f.wait_max_ms <= f.bound_ms ? "within" : "EXCEEDED");
        std::printf(
            "fair   without a dead waiter: (K-1) x (hold p99 + handoff p99) = %d x (%.2f ms + %.2f "
            "ms)"
            " = %.1f ms; longest wait %.1f ms\n",
            c.clients - 1, f.hold_p99_ms, f.handoff_p99_us / 1e3, f.tight_ms, f.wait_max_ms);
      }
    }
    if (plain && fair && !c.json && plain_h50 > 0) {
      std::printf("handoff p50 fair / plain = %.2f (target <= 1.5)\n", fair_h50 / plain_h50);
    }
  }
  return errors == 0 && within ? 0 : 1;
}
