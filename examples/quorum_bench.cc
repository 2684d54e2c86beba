// quorum_bench: acquire+release latency of a quorum lock over the first
// server alone and over all servers given, measured in the same run.
// Starts nothing: point it at running servers.
//
//   quorum_bench --url redis://127.0.0.1:7001 --url redis://127.0.0.1:7002 ...
//                [--iterations 2000] [--no-fencing]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "edgelock/edgelock.h"

using namespace edgelock;

namespace {

struct Args {
  std::vector<const char*> urls;
  int iterations = 2000;
  bool fencing = true;
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
      a->urls.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      a->iterations = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-fencing") == 0) {
      a->fencing = false;
    } else {
      return false;
    }
  }
  return !a->urls.empty() && a->urls.size() <= kMaxQuorumServers && a->iterations > 0;
}

Nanos p50(std::vector<Nanos>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// One acquire+release; its duration, or -1 on failure.
Nanos cycle(QuorumLock& lock) {
  Clock& clock = default_clock();
  const Nanos t0 = clock.now();
  const Status s = lock.acquire(millis(1000));
  const Status r = s.ok() ? lock.release() : s;
  if (!r.ok()) {
    std::fprintf(stderr, "cycle over %zu: %s (%s)\n", lock.size(), r.to_string(), lock.connection_error());
    return -1;
  }
  return clock.now() - t0;
}

// Alternates the two locks cycle by cycle, so both see the same load;
// the first 10% are warm-up. Returns false on failure.
bool measure(QuorumLock& one, QuorumLock& all, const Args& a, Nanos* p_one, Nanos* p_all) {
  std::vector<Nanos> s1, sn;
  s1.reserve(static_cast<size_t>(a.iterations));
  sn.reserve(static_cast<size_t>(a.iterations));
  for (int i = 0; i < a.iterations + a.iterations / 10; ++i) {
    const Nanos t1 = cycle(one);
    const Nanos tn = cycle(all);
    if (t1 < 0 || tn < 0) return false;
    if (i < a.iterations / 10) continue;
    s1.push_back(t1);
    sn.push_back(tn);
  }
  *p_one = p50(s1);
  *p_all = p50(sn);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr, "usage: %s --url URL [--url URL ...] [--iterations N] [--no-fencing]\n", argv[0]);
    return 2;
  }
  const size_t n = a.urls.size();
  // conns[n] is a second connection to the first server, for the 1-server
  // lock: a quorum lock needs its connections to itself.
  std::vector<Connection> conns(n + 1);
  std::vector<Connection*> ptrs(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    const char* url = a.urls[i < n ? i : 0];
    if (!conns[i].setup(url).ok() || !conns[i].connect().ok()) {
      std::fprintf(stderr, "%s: %s\n", url, conns[i].last_error());
      return 1;
    }
    ptrs[i] = &conns[i];
  }
  QuorumOptions o;
  o.fencing = a.fencing;
  QuorumLock one, all;
  if (!one.init(&ptrs[n], 1, Bytes::from_cstr("edgelock-bench-1"), o).ok() ||
      !all.init(ptrs.data(), n, Bytes::from_cstr("edgelock-bench-n"), o).ok()) {
    return 1;
  }
  Nanos p_one = 0, p_all = 0;
  if (!measure(one, all, a, &p_one, &p_all)) return 1;
  std::printf("acquire+release p50 over %d cycles each, interleaved (fencing %s):\n", a.iterations,
              a.fencing ? "on" : "off");
  std::printf("  1 server : %8.1f us\n", static_cast<double>(p_one) / 1000.0);
  std::printf("  %zu servers: %8.1f us\n", n, static_cast<double>(p_all) / 1000.0);
  std::printf("  ratio    : %8.2f\n", static_cast<double>(p_all) / static_cast<double>(p_one));
  return 0;
}
