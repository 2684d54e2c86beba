// edgelock-demo: ~8 worker processes share one simulated device through
// one lock for ~20 s; some hang past their TTL or crash on purpose. Prints
// a timeline and a summary; exits 1 if two workers ever overlapped.
//
//   edgelock-demo --url redis://127.0.0.1:PORT [--workers 8] [--seconds 20]
//                 [--ttl 1000] [--hang-pct 6] [--crash-pct 4]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "demo_device.h"
#include "edgelock/clock.h"
#include "demo_worker.h"

namespace demo {
namespace {

struct Slot {
  pid_t pid = -1;
  int id = -1;
  int64_t resume_at = 0;  // SIGCONT a hung worker at this time (0 = running)
};

bool parse_args(int argc, char** argv, Config* c) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    const long v = std::strtol(argv[i + 1], nullptr, 10);
    if (!std::strcmp(k, "--url")) c->url = argv[i + 1];
    else if (!std::strcmp(k, "--workers") && v > 0 && v <= 16) c->workers = static_cast<int>(v);
    else if (!std::strcmp(k, "--seconds") && v > 0 && v <= 3600) c->seconds = static_cast<int>(v);
    else if (!std::strcmp(k, "--ttl") && v >= 100 && v <= 60000) c->ttl_ms = v;
    else if (!std::strcmp(k, "--hang-pct") && v >= 0 && v <= 50) c->hang_pct = static_cast<int>(v);
    else if (!std::strcmp(k, "--crash-pct") && v >= 0 && v <= 50) c->crash_pct = static_cast<int>(v);
    else return false;
  }
  return c->url != nullptr && argc % 2 == 1;
}

pid_t spawn(Device& dev, const Config& cfg, int id) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) _exit(worker_main(dev, cfg, id));
  return pid;
}

int64_t percentile(int64_t* v, int n, int pct) {
  if (n == 0) return 0;
  std::sort(v, v + n);
  int i = (n * pct + 99) / 100 - 1;
  return v[std::max(0, std::min(n - 1, i))];
}

// Reaps, resumes hung workers after their pause, respawns crashed ones.
// Bounded: ends at stop + 15 s whatever happens.
int supervise(Device& dev, const Config& cfg, Slot* slots, int* next_id) {
  int crashes = 0;
  const int64_t hard_end = dev.stop_ns + 15000000000LL;
  for (int live = cfg.workers; live > 0;) {
    const int64_t now = mono_ns();
    for (int i = 0; i < cfg.workers; ++i) {
      if (slots[i].resume_at && now >= slots[i].resume_at) {
        kill(slots[i].pid, SIGCONT);
        slots[i].resume_at = 0;
      }
    }
    if (now > hard_end) {
      for (int i = 0; i < cfg.workers; ++i) if (slots[i].pid > 0) kill(slots[i].pid, SIGKILL);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) {
      usleep(5000);
      continue;
    }
    Slot* s = std::find_if(slots, slots + cfg.workers, [pid](const Slot& x) { return x.pid == pid; });
    if (s == slots + cfg.workers) continue;
    if (WIFSTOPPED(status)) {
      // A pause well past the TTL: the lease must be gone when it wakes.
      s->resume_at = now + (cfg.ttl_ms * 8 / 5 + (pid % 5) * cfg.ttl_ms / 10) * 1000000;  // ms -> ns
      continue;
    }
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && now < dev.stop_ns) {
      ++crashes;
      if (*next_id < kMaxWorkers) {
        s->id = (*next_id)++;
        s->pid = spawn(dev, cfg, s->id);
        say(dev, s->id, "starts (replacing a crashed worker)");
        continue;
      }
    }
    s->pid = -1;
    --live;
  }
  return crashes;
}

void summary(Device& dev, const Config& cfg, int crashes) {
  const int n = std::min(dev.n_waits.load(), kMaxWaits);
  const int64_t p50 = percentile(dev.waits_us, n, 50) / 1000;
  const int64_t p99 = percentile(dev.waits_us, n, 99) / 1000;
  std::printf("\nSummary: %d workers, %d s, TTL %lld ms (renewed every ~%lld ms)\n", cfg.workers,
              cfg.seconds, (long long)cfg.ttl_ms, (long long)cfg.ttl_ms / 3);
  std::printf("  grants                        %d\n", dev.grants.load());
  std::printf("  wait for a grant p50 / p99    %lld ms / %lld ms\n", (long long)p50, (long long)p99);
  std::printf("  waits given up after 5 s      %d\n", dev.gave_up.load());
  std::printf("  renewals by the keeper        %d\n", dev.renewals.load());
  std::printf("  leases lost (hung past TTL)   %d\n", dev.hangs.load());
  std::printf("  losses detected by the keeper %d\n", dev.lost_detected.load());
  std::printf("  crashes (lock freed by TTL)   %d\n", crashes);
  std::printf("  device writes accepted        %d\n", dev.writes_accepted.load());
  std::printf("  stale writes rejected         %d  (by the device's fencing check)\n",
              dev.stale_rejected.load());
  std::printf("  errors                        %d\n", dev.errors.load());
  std::printf("  overlaps                      %d  %s\n", dev.overlaps.load(),
              dev.overlaps.load() == 0 ? "(never two holders at once)" : "<-- MUTUAL EXCLUSION BROKEN");
}

}  // namespace
}  // namespace demo

int main(int argc, char** argv) {
  demo::Config cfg;
  if (!demo::parse_args(argc, argv, &cfg)) {
    std::fprintf(stderr, "usage: edgelock-demo --url URL [--workers N] [--seconds S] [--ttl MS]"
                         " [--hang-pct P] [--crash-pct P]\n");
    return 2;
  }
  demo::Device* dev = demo::Device::create();
  if (!dev) {
    std::perror("mmap");
    return 3;
  }
  dev->start_ns = demo::mono_ns();
  dev->stop_ns = dev->start_ns + static_cast<int64_t>(cfg.seconds) * 1000000000LL;
  std::printf("edgelock demo: %d workers share one device through lock 'demo:device' on %s\n"
              "  TTL %lld ms, %d%% of holds hang past the TTL, %d%% crash, %d%% are long jobs\n\n",
              cfg.workers, cfg.url, (long long)cfg.ttl_ms, cfg.hang_pct, cfg.crash_pct, cfg.long_pct);
  demo::Slot slots[16];
  int next_id = 0;
  for (int i = 0; i < cfg.workers; ++i) {
    slots[i].id = next_id++;
    slots[i].pid = demo::spawn(*dev, cfg, slots[i].id);
  }
  const int crashes = demo::supervise(*dev, cfg, slots, &next_id);
  demo::summary(*dev, cfg, crashes);
  return dev->overlaps.load() == 0 && dev->grants.load() > 0 ? 0 : 1;
}
