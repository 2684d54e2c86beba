// edgelock-demo: ~8 worker processes share one simulated device through
// one lock for ~20 s; some hang past their TTL or crash on purpose. Prints
// a timeline and a summary; exits 1 if two workers ever overlapped. With
// --mode both (the default) it runs twice, with a plain Lock and with a
// FairLock (first come, first served), and the summary shows the two side
// by side.
//
//   edgelock-demo --url redis://127.0.0.1:PORT [--workers 8] [--seconds 20]
//                 [--ttl 1000] [--hang-pct 6] [--crash-pct 4]
//                 [--mode both|plain|fair]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "demo_device.h"
#include "demo_worker.h"
#include "edgelock/clock.h"

namespace demo {
namespace {

struct Slot {
  pid_t pid = -1;
  int id = -1;
  int64_t resume_at = 0;  // SIGCONT a hung worker at this time (0 = running)
};

enum Modes { kPlain = 1, kFair = 2 };

bool parse_args(int argc, char** argv, Config* c, int* modes) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    const char* text = argv[i + 1];
    const long v = std::strtol(text, nullptr, 10);
    if (!std::strcmp(k, "--url")) c->url = text;
    else if (!std::strcmp(k, "--mode") && !std::strcmp(text, "both")) *modes = kPlain | kFair;
    else if (!std::strcmp(k, "--mode") && !std::strcmp(text, "plain")) *modes = kPlain;
    else if (!std::strcmp(k, "--mode") && !std::strcmp(text, "fair")) *modes = kFair;
    else if (!std::strcmp(k, "--workers") && v > 0 && v <= 16) c->workers = static_cast<int>(v);
    else if (!std::strcmp(k, "--seconds") && v > 0 && v <= 3600) c->seconds = static_cast<int>(v);
    else if (!std::strcmp(k, "--ttl") && v >= 100 && v <= 60000) c->ttl_ms = v;
    else if (!std::strcmp(k, "--hang-pct") && v >= 0 && v <= 50) c->hang_pct = static_cast<int>(v);
    else if (!std::strcmp(k, "--crash-pct") && v >= 0 && v <= 50)
      c->crash_pct = static_cast<int>(v);
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
      for (int i = 0; i < cfg.workers; ++i)
        if (slots[i].pid > 0) kill(slots[i].pid, SIGKILL);
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG | WUNTRACED);
    if (pid <= 0) {
      usleep(5000);
      continue;
    }
    Slot* s =
        std::find_if(slots, slots + cfg.workers, [pid](const Slot& x) { return x.pid == pid; });
    if (s == slots + cfg.workers) continue;
    if (WIFSTOPPED(status)) {
      // A pause well past the TTL: the lease must be gone when it wakes.
      s->resume_at =
          now + (cfg.ttl_ms * 8 / 5 + (pid % 5) * cfg.ttl_ms / 10) * 1000000;  // ms -> ns
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

// One mode's figures.
struct Summary {
  int grants = 0, gave_up = 0, renewals = 0, hangs = 0, lost = 0, crashes = 0;
  int writes = 0, stale = 0, errors = 0, overlaps = 0, most_passes = 0, passed_twice = 0;
  int64_t p50_ms = 0, p99_ms = 0, max_ms = 0;
};

Summary collect(Device& dev, int crashes) {
  Summary s;
  const int n = std::min(dev.n_waits.load(), kMaxWaits);
  s.p50_ms = percentile(dev.waits_us, n, 50) / 1000;
  s.p99_ms = percentile(dev.waits_us, n, 99) / 1000;
  s.max_ms = percentile(dev.waits_us, n, 100) / 1000;
  s.grants = dev.grants.load();
  s.gave_up = dev.gave_up.load();
  s.renewals = dev.renewals.load();
  s.hangs = dev.hangs.load();
  s.lost = dev.lost_detected.load();
  s.crashes = crashes;
  s.writes = dev.writes_accepted.load();
  s.stale = dev.stale_rejected.load();
  s.errors = dev.errors.load();
  s.overlaps = dev.overlaps.load();
  s.most_passes = dev.most_passes.load();
  s.passed_twice = dev.passed_twice.load();
  return s;
}

// One run: the workers share a fresh device through `cfg.key`.
bool run_mode(const Config& cfg, Summary* out) {
  Device* dev = Device::create();
  if (!dev) {
    std::perror("mmap");
    return false;
  }
  dev->start_ns = mono_ns();
  dev->stop_ns = dev->start_ns + static_cast<int64_t>(cfg.seconds) * 1000000000LL;
  std::printf("== %s: %d workers share one device through lock '%s'\n",
              cfg.fair ? "FairLock" : "Lock", cfg.workers, cfg.key);
  Slot slots[16];
  int next_id = 0;
  for (int i = 0; i < cfg.workers; ++i) {
    slots[i].id = next_id++;
    slots[i].pid = spawn(*dev, cfg, slots[i].id);
  }
  *out = collect(*dev, supervise(*dev, cfg, slots, &next_id));
  munmap(dev, sizeof(Device));
  std::printf("\n");
  return true;
}

// One summary row: the label, then each mode's value.
void row(const char* label, const Summary* s, int n, int Summary::*field) {
  std::printf("  %-34s", label);
  for (int i = 0; i < n; ++i) std::printf(" %16d", s[i].*field);
  std::printf("\n");
}

void summary(const Config& cfg, const char* const* names, const Summary* s, int n) {
  std::printf("Summary: %d workers, %d s per lock, TTL %lld ms (renewed every ~%lld ms)\n",
              cfg.workers, cfg.seconds, (long long)cfg.ttl_ms, (long long)cfg.ttl_ms / 3);
  std::printf("  %-34s", "");
  for (int i = 0; i < n; ++i) std::printf(" %16s", names[i]);
  std::printf("\n");
  row("grants", s, n, &Summary::grants);
  std::printf("  %-34s", "wait for a grant p50 / p99 / max");
  for (int i = 0; i < n; ++i) {
    char text[48];
    std::snprintf(text, sizeof text, "%lld/%lld/%lld", (long long)s[i].p50_ms,
                  (long long)s[i].p99_ms, (long long)s[i].max_ms);
    std::printf(" %16s", text);
  }
  std::printf("  (ms, from first asking)\n");
  row("waits past 5 s (given up, retried)", s, n, &Summary::gave_up);
  row("waits another worker went twice", s, n, &Summary::passed_twice);
  row("most turns of one other in a wait", s, n, &Summary::most_passes);
  row("renewals by the keeper", s, n, &Summary::renewals);
  row("leases lost (hung past TTL)", s, n, &Summary::hangs);
  row("losses detected by the keeper", s, n, &Summary::lost);
  row("crashes (lock freed by TTL)", s, n, &Summary::crashes);
  row("device writes accepted", s, n, &Summary::writes);
  row("stale writes rejected (fencing)", s, n, &Summary::stale);
  row("errors", s, n, &Summary::errors);
  row("overlaps (two holders at once)", s, n, &Summary::overlaps);
  int overlaps = 0;
  for (int i = 0; i < n; ++i) overlaps += s[i].overlaps;
  std::printf("  %s\n",
              overlaps == 0 ? "never two holders at once" : "<-- MUTUAL EXCLUSION BROKEN");
}

}  // namespace
}  // namespace demo

int main(int argc, char** argv) {
  demo::Config cfg;
  int modes = demo::kPlain | demo::kFair;
  if (!demo::parse_args(argc, argv, &cfg, &modes)) {
    std::fprintf(stderr,
                 "usage: edgelock-demo --url URL [--workers N] [--seconds S] [--ttl MS]"
                 " [--hang-pct P] [--crash-pct P] [--mode both|plain|fair]\n");
    return 2;
  }
  std::printf(
      "edgelock demo: %d workers share one device on %s\n"
      "  TTL %lld ms, %d%% of holds hang past the TTL, %d%% crash, %d%% are long jobs\n\n",
      cfg.workers, cfg.url, (long long)cfg.ttl_ms, cfg.hang_pct, cfg.crash_pct, cfg.long_pct);
  demo::Summary s[2];
  const char* names[2] = {};
  int n = 0;
  bool ok = true;
  for (int m : {demo::kPlain, demo::kFair}) {
    if (!(modes & m)) continue;
    cfg.fair = m == demo::kFair;
    cfg.key = cfg.fair ? "demo:device:fair" : "demo:device";
    names[n] = cfg.fair ? "FairLock" : "Lock";
    if (!demo::run_mode(cfg, &s[n])) return 3;
    ok = ok && s[n].overlaps == 0 && s[n].grants > 0;
    ++n;
  }
  demo::summary(cfg, names, s, n);
  return ok ? 0 : 1;
}
