#include "bench_util.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace bench {

namespace {

void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--workload uncontended|contended|handoff|quorum] [--url URL]...\n"
               "          [--cycles N] [--clients K] [--ttl-ms T] [--hold-us H] [--json]\n"
               "          [--mode seq|par] [--key NAME] [--no-wake] [--no-fencing]\n",
               program);
}

bool to_long(const char* s, long min, long* out) {
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (!s[0] || *end || v < min) return false;
  *out = v;
  return true;
}

}  // namespace

bool parse_args(int argc, char** argv, Args* out, const char* program) {
  for (int i = 1; i < argc; ++i) {
    const char* f = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    long n = 0;
    bool ok = true;
    if (std::strcmp(f, "--json") == 0 || std::strcmp(f, "--no-wake") == 0 ||
        std::strcmp(f, "--no-fencing") == 0) {
      (f[2] == 'j' ? out->json : f[5] == 'w' ? out->no_wake : out->no_fencing) = true;
      continue;
    }
    if (!v) ok = false;
    else if (std::strcmp(f, "--workload") == 0) out->workload = v;
    else if (std::strcmp(f, "--mode") == 0) out->mode = v;
    else if (std::strcmp(f, "--key") == 0) out->key = v;
    else if (std::strcmp(f, "--url") == 0)
      ok = out->nurls < kMaxUrls && (out->urls[out->nurls++] = v);
    else if (std::strcmp(f, "--cycles") == 0) ok = to_long(v, 1, &out->cycles);
    else if (std::strcmp(f, "--clients") == 0)
      ok = to_long(v, 1, &n) && n <= 64 && (out->clients = static_cast<int>(n));
    else if (std::strcmp(f, "--ttl-ms") == 0) ok = to_long(v, 1, &out->ttl_ms);
    else if (std::strcmp(f, "--hold-us") == 0) ok = to_long(v, 0, &out->hold_us);
    else ok = false;
    if (!ok) {
      std::fprintf(stderr, "%s: bad or unknown flag %s\n", program, f);
      usage(program);
      return false;
    }
    ++i;
  }
  if (out->nurls == 0) out->urls[out->nurls++] = "redis://127.0.0.1:6379";
  return true;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void hold_for_us(long us) {
  if (us <= 0) return;
  const int64_t until = now_ns() + static_cast<int64_t>(us) * 1000;
  if (us >= 200) {
    timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
  }
  while (now_ns() < until) {
  }
}

void Histogram::add(int64_t ns) {
  uint64_t v = ns > 0 ? static_cast<uint64_t>(ns) : 0;
  int idx = 0;
  if (v < kSub) {
    idx = static_cast<int>(v);
  } else {
    const int exp = 63 - __builtin_clzll(v);  // >= 6
    idx = (exp - 5) * kSub + static_cast<int>((v >> (exp - 6)) & (kSub - 1));
  }
  if (idx >= kBuckets) idx = kBuckets - 1;
  counts_[idx].fetch_add(1, std::memory_order_relaxed);
  total_.fetch_add(1, std::memory_order_relaxed);
}

int64_t Histogram::quantile(double q) const {
  const uint64_t total = count();
  if (total == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(total - 1)) + 1;
  for (int i = 0; i < kBuckets; ++i) {
    const uint64_t c = counts_[i].load(std::memory_order_relaxed);
    if (c >= rank) {
      if (i < kSub) return i;
      const int exp = i / kSub + 5;
      const int64_t lo = (int64_t{1} << exp) + (static_cast<int64_t>(i % kSub) << (exp - 6));
      return lo + (int64_t{1} << (exp - 6)) / 2;  // bucket middle
    }
    rank -= c;
  }
  return 0;
}

void* alloc_shared(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

long own_max_rss_kb() {
  // VmHWM belongs to this address space. getrusage()'s ru_maxrss would do,
  // except that Linux carries it across execve(): a benchmark started by a
  // big parent (python) would report the parent's peak.
  long kb = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[128];
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    }
    std::fclose(f);
  }
  if (kb < 0) {
    rusage self{};
    getrusage(RUSAGE_SELF, &self);
    kb = self.ru_maxrss;
  }
  return kb;
}

void print_report(const Report& r, bool json) {
  const double ops = r.seconds > 0 ? static_cast<double>(r.cycles) / r.seconds : 0;
  char p50[32] = "null", p99[32] = "null", h50[32] = "null", h99[32] = "null", cpg[32] = "null";
  if (r.latency && r.latency->count()) {
    std::snprintf(p50, sizeof p50, "%.1f", static_cast<double>(r.latency->quantile(0.50)) / 1e3);
    std::snprintf(p99, sizeof p99, "%.1f", static_cast<double>(r.latency->quantile(0.99)) / 1e3);
  }
  if (r.handoff && r.handoff->count()) {
    std::snprintf(h50, sizeof h50, "%.1f", static_cast<double>(r.handoff->quantile(0.50)) / 1e3);
    std::snprintf(h99, sizeof h99, "%.1f", static_cast<double>(r.handoff->quantile(0.99)) / 1e3);
  }
  if (r.commands_per_grant >= 0) std::snprintf(cpg, sizeof cpg, "%.2f", r.commands_per_grant);
  const char* fmt =
      json ? "{\"peer\":\"%s\",\"workload\":\"%s\",\"cycles\":%ld,\"seconds\":%.3f,\"p50_us\":%s,"
             "\"p99_us\":%s,\"ops_per_s\":%.0f,\"handoff_p50_us\":%s,\"handoff_p99_us\":%s,"
             "\"max_rss_kb\":%ld,\"commands_per_grant\":%s}\n"
           : "peer %s  workload %s  cycles %ld  seconds %.3f  p50 %s us  p99 %s us  %.0f ops/s\n"
             "handoff p50 %s us  p99 %s us  max rss %ld kB  commands/grant %s\n";
  const long own = own_max_rss_kb();
  const long rss = r.max_rss_kb > own ? r.max_rss_kb : own;
  std::printf(fmt, r.peer, r.workload, r.cycles, r.seconds, p50, p99, ops, h50, h99, rss, cpg);
  if (r.errors) std::fprintf(stderr, "%ld errors during the run\n", r.errors);
}

}  // namespace bench
