// quorum_bench: acquire+release latency of a quorum lock over the first
// server alone and over all servers given, measured in the same run.
// Starts no servers: point it at running ones. --delay-ms D puts an
// in-process test::DelayProxy (bench/delay_proxy.h) in front of
// each server, adding D ms each way (emulated network latency; the servers
// must then be on 127.0.0.1). --sequential also times N plain `Lock`s
// taken one after another (what a client without a parallel fan-out pays).
//
//   quorum_bench --url redis://127.0.0.1:7001 --url redis://127.0.0.1:7002 ...
//                [--iterations 2000] [--no-fencing] [--delay-ms D] [--sequential]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "delay_proxy.h"
#include "edgelock/edgelock.h"

using namespace edgelock;

namespace {

using DoubleMs = std::chrono::duration<double, std::milli>;

struct Args {
  std::vector<const char*> urls;
  int iterations = 2000;
  bool fencing = true;
  double delay_ms = 0;
  bool sequential = false;
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--url") == 0 && i + 1 < argc) {
      a->urls.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      a->iterations = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--no-fencing") == 0) {
      a->fencing = false;
    } else if (std::strcmp(argv[i], "--delay-ms") == 0 && i + 1 < argc) {
      a->delay_ms = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--sequential") == 0) {
      a->sequential = true;
    } else {
      return false;
    }
  }
  return !a->urls.empty() && a->urls.size() <= kMaxQuorumServers && a->iterations > 0 &&
         a->delay_ms >= 0;
}

Nanos p50(std::vector<Nanos>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// One acquire+release; its duration, or -1 on failure.
Nanos cycle(QuorumLock& lock) {
  Clock& clock = default_clock();
  const TimePoint t0 = clock.now();
  const Status s = lock.acquire(Millis(1000));
  const Status r = s.ok() ? lock.release() : s;
  if (!r.ok()) {
    std::fprintf(stderr, "cycle over %zu: %s (%s)\n", lock.size(), r.to_string(),
                 lock.last_error());
    return Nanos(-1);
  }
  return clock.now() - t0;
}

// Plain `Lock`s acquired one after another, then released: the cost of a
// client that asks its servers in turn. Its duration, or -1 on failure.
Nanos sequential_cycle(std::vector<std::unique_ptr<Lock>>& locks) {
  Clock& clock = default_clock();
  const TimePoint t0 = clock.now();
  for (auto& l : locks) {
    const Status s = l->try_acquire();
    if (!s.ok()) {
      std::fprintf(stderr, "sequential acquire: %s (%s)\n", s.to_string(), l->last_error());
      return Nanos(-1);
    }
  }
  for (auto& l : locks) {
    if (!l->release().ok()) return Nanos(-1);
  }
  return clock.now() - t0;
}

// Alternates the locks cycle by cycle, so all see the same load; the
// first 10% are warm-up. `one_seq`/`all_seq` may be empty. Returns false
// on failure.
bool measure(QuorumLock& one, QuorumLock& all, std::vector<std::unique_ptr<Lock>>& one_seq,
             std::vector<std::unique_ptr<Lock>>& all_seq, const Args& a, Nanos p[4]) {
  std::vector<Nanos> samples[4];
  for (auto& v : samples) v.reserve(static_cast<size_t>(a.iterations));
  for (int i = 0; i < a.iterations + a.iterations / 10; ++i) {
    const Nanos t[4] = {cycle(one), cycle(all),
                        one_seq.empty() ? Nanos::zero() : sequential_cycle(one_seq),
                        all_seq.empty() ? Nanos::zero() : sequential_cycle(all_seq)};
    for (Nanos x : t) {
      if (x < Nanos::zero()) return false;
    }
    if (i < a.iterations / 10) continue;
    for (int k = 0; k < 4; ++k) samples[k].push_back(t[k]);
  }
  for (int k = 0; k < 4; ++k) p[k] = p50(samples[k]);
  return true;
}

// --delay-ms: one proxy per server; returns the URLs to use instead.
bool start_proxies(Args& a, std::vector<std::unique_ptr<test::DelayProxy>>& proxies,
                   std::vector<std::string>& urls) {
  const Nanos delay = std::chrono::duration_cast<Nanos>(DoubleMs(a.delay_ms));
  for (const char* url : a.urls) {
    Endpoint e;
    if (!parse_url(url, &e).ok() || e.scheme != Scheme::kTcp ||
        (std::strcmp(e.host, "127.0.0.1") != 0 && std::strcmp(e.host, "localhost") != 0)) {
      std::fprintf(stderr, "%s: --delay-ms needs redis://127.0.0.1:PORT URLs\n", url);
      return false;
    }
    proxies.emplace_back(new test::DelayProxy(e.port, delay));
    if (!proxies.back()->start()) return false;
    urls.push_back(proxies.back()->url());
  }
  for (size_t i = 0; i < urls.size(); ++i) a.urls[i] = urls[i].c_str();
  return true;
}

// Lock objects for --sequential, each on its own connection.
bool make_locks(const std::vector<const char*>& urls, size_t n, const char* key, Connection* conns,
                std::vector<std::unique_ptr<Lock>>& locks) {
  for (size_t i = 0; i < n; ++i) {
    if (!conns[i].init(urls[i]).ok() || !conns[i].connect().ok()) return false;
    locks.emplace_back(new Lock(conns[i]));
    if (!locks.back()->init(Bytes::from_cstr(key)).ok()) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: %s --url URL [--url URL ...] [--iterations N] [--no-fencing]\n"
                 "          [--delay-ms D] [--sequential]\n",
                 argv[0]);
    return 2;
  }
  std::vector<std::unique_ptr<test::DelayProxy>> proxies;
  std::vector<std::string> proxy_urls;
  if (a.delay_ms > 0 && !start_proxies(a, proxies, proxy_urls)) return 1;
  const size_t n = a.urls.size();
  // conns[n] is a second connection to the first server, for the 1-server
  // lock: a quorum lock needs its connections to itself.
  std::vector<Connection> conns(n + 1);
  std::vector<Connection*> ptrs(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    const char* url = a.urls[i < n ? i : 0];
    if (!conns[i].init(url).ok() || !conns[i].connect().ok()) {
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
  std::vector<Connection> seq_conns(a.sequential ? n + 1 : 0);
  std::vector<std::unique_ptr<Lock>> one_seq, all_seq;
  if (a.sequential &&
      (!make_locks(a.urls, n, "edgelock-bench-seq-n", seq_conns.data(), all_seq) ||
       !make_locks(a.urls, 1, "edgelock-bench-seq-1", seq_conns.data() + n, one_seq))) {
    std::fprintf(stderr, "--sequential: setting up the locks failed\n");
    return 1;
  }
  Nanos p[4] = {};
  if (!measure(one, all, one_seq, all_seq, a, p)) return 1;
  std::printf(
      "acquire+release p50 over %d cycles each, interleaved (fencing %s, %.3g ms each way):\n",
      a.iterations, a.fencing ? "on" : "off", a.delay_ms);
  std::printf("  1 server : %8.1f us\n", static_cast<double>(p[0].count()) / 1000.0);
  std::printf("  %zu servers: %8.1f us\n", n, static_cast<double>(p[1].count()) / 1000.0);
  std::printf("  ratio    : %8.2f\n",
              static_cast<double>(p[1].count()) / static_cast<double>(p[0].count()));
  if (a.sequential) {
    std::printf("sequential reference (plain Locks, one after another):\n");
    std::printf("  1 lock   : %8.1f us\n", static_cast<double>(p[2].count()) / 1000.0);
    std::printf("  %zu locks  : %8.1f us\n", n, static_cast<double>(p[3].count()) / 1000.0);
    std::printf("  ratio    : %8.2f\n",
                static_cast<double>(p[3].count()) / static_cast<double>(p[2].count()));
  }
  return 0;
}
