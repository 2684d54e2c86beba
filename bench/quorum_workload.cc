// The quorum workload of edgelock-bench: one process, one QuorumLock over
// every --url, try_acquire + release per cycle (fencing on, as by default;
// --no-fencing skips the fence write-back, which runs only when the
// servers disagreed on the fence).
// Built only when the tree has QuorumLock (see bench/meson.build).
#include <cstdio>

#include "bench_util.h"
#include "edgelock/edgelock.h"
#include "edgelock/quorum_lock.h"

namespace bench {

int run_quorum(const Args& a, Histogram& latency) {
  static edgelock::Connection conns[kMaxUrls];
  edgelock::Connection* ptrs[kMaxUrls] = {};
  for (int i = 0; i < a.nurls; ++i) {
    if (!conns[i].init(a.urls[i]).ok() || !conns[i].connect().ok()) {
      std::fprintf(stderr, "connect %s: %s\n", a.urls[i], conns[i].last_error());
      return 1;
    }
    ptrs[i] = &conns[i];
  }
  static edgelock::QuorumLock lock;
  edgelock::QuorumOptions o;
  o.ttl = edgelock::Millis(a.ttl_ms);
  o.fencing = !a.no_fencing;
  if (!lock.init(ptrs, static_cast<size_t>(a.nurls), edgelock::Bytes::from_cstr(a.key), o).ok())
    return 1;
  if (!lock.acquire(edgelock::Millis(30000)).ok() || !lock.release().ok()) {
    std::fprintf(stderr, "warm-up cycle failed: %s\n", lock.last_error());
    return 1;
  }
  uint64_t before = 0;
  for (int i = 0; i < a.nurls; ++i) before += conns[i].stats().commands;
  long errors = 0;
  const int64_t t0 = now_ns();
  for (long i = 0; i < a.cycles; ++i) {
    const int64_t c0 = now_ns();
    if (!lock.try_acquire().ok() || !lock.release().ok()) ++errors;
    latency.add(now_ns() - c0);
  }
  Report r;
  r.workload = a.no_fencing ? "quorum-nofence" : "quorum";
  r.cycles = a.cycles;
  r.seconds = static_cast<double>(now_ns() - t0) / 1e9;
  r.latency = &latency;
  uint64_t after = 0;
  for (int i = 0; i < a.nurls; ++i) after += conns[i].stats().commands;
  r.commands_per_grant = static_cast<double>(after - before) / static_cast<double>(a.cycles);
  r.errors = errors;
  print_report(r, a.json);
  return errors ? 1 : 0;
}

}  // namespace bench
