// edgelock-sim: deterministic simulation of the real primitives over a
// simulated network and simulated Redis servers, with an invariant checker
// after every event. See docs/simulation.md.
//
//   edgelock_sim --seed S            replay one run (add --trace for every event)
//   edgelock_sim --seeds N [--from S] [--max-seconds T]
//   options: --clients N --servers N --work NAME --data-loss --delayed-restart
//            --no-faults --fault-scale X --expect-violation --determinism --quiet
//            --hashes (each seed's trace hash, to compare with a --seed replay)

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/scripts.h"
#include "world/checker.h"
#include "world/workloads.h"
#include "world/world.h"

namespace {

// Tokens, permit ids and jitter seeds come from getrandom(): the simulation
// supplies them from the run's seed, so a run replays exactly. (A definition
// in the executable takes the place of libc's for the library linked in.)
edgelock::sim::Prng g_random(1);

}  // namespace

extern "C" ssize_t getrandom(void* buf, size_t n, unsigned int flags) {
  (void)flags;
  uint8_t* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(g_random.next() >> 56);
  return static_cast<ssize_t>(n);
}

namespace edgelock {
namespace sim {
namespace {

struct Options {
  uint64_t from = 1;
  uint64_t seeds = 1;
  bool one = false;
  bool trace = false;
  bool expect_violation = false;
  bool determinism = false;
  bool hashes = false;
  bool quiet = false;
  bool keep_going = false;
  double max_seconds = 0;
  uint64_t min_events = 0;
  RunOverrides o;
  std::string flags;  // to print the replay command
};

std::string work_summary(uint64_t seed, const Options& opt) {
  const RunConfig c = RunConfig::from_seed(seed, opt.o);
  std::string s;
  for (Work w : c.work) {
    const std::string n = work_name(w);
    if (s.find(n) == std::string::npos) s += (s.empty() ? "" : ",") + n;
  }
  return s;
}

int work_index(const char* name) {
  for (int i = 0; i <= static_cast<int>(kLastWork); ++i) {
    if (std::strcmp(work_name(static_cast<Work>(i)), name) == 0) return i;
  }
  return -2;
}

bool parse(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--seed" && has) {
      opt->from = std::strtoull(argv[++i], nullptr, 10);
      opt->one = true;
    } else if (a == "--from" && has) {
      opt->from = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--seeds" && has) {
      opt->seeds = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--min-events" && has) {
      opt->min_events = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--max-seconds" && has) {
      opt->max_seconds = std::atof(argv[++i]);
    } else if (a == "--clients" && has) {
      opt->o.clients = std::atoi(argv[++i]);
      opt->flags += " --clients " + std::string(argv[i]);
    } else if (a == "--servers" && has) {
      opt->o.servers = std::atoi(argv[++i]);
      opt->flags += " --servers " + std::string(argv[i]);
    } else if (a == "--work" && has) {
      opt->o.work = work_index(argv[++i]);
      if (opt->o.work < 0) return false;
      opt->flags += " --work " + std::string(argv[i]);
    } else if (a == "--fault-scale" && has) {
      opt->o.fault_scale = std::atof(argv[++i]);
      opt->flags += " --fault-scale " + std::string(argv[i]);
    } else if (a == "--late-replies") {
      opt->o.late_replies = true;
      opt->flags += " --late-replies";
    } else if (a == "--data-loss") {
      opt->o.data_loss = true;
      opt->flags += " --data-loss";
    } else if (a == "--delayed-restart") {
      opt->o.delayed_restart = true;
      opt->flags += " --delayed-restart";
    } else if (a == "--strict") {  // kept for old replay lines: every lease is always checked
      opt->o.strict_cleanup = true;
      opt->flags += " --strict";
    } else if (a == "--strict-cleanup") {
      opt->o.strict_cleanup = true;
      opt->flags += " --strict-cleanup";
    } else if (a == "--no-faults") {
      opt->o.no_faults = true;
      opt->flags += " --no-faults";
    } else if (a == "--trace") {
      opt->trace = true;
    } else if (a == "--expect-violation") {
      opt->expect_violation = true;
    } else if (a == "--determinism") {
      opt->determinism = true;
    } else if (a == "--hashes") {
      opt->hashes = true;
    } else if (a == "--quiet") {
      opt->quiet = true;
    } else if (a == "--keep-going") {
      opt->keep_going = true;
      opt->quiet = true;
    } else {
      return false;
    }
  }
  if (opt->one) opt->seeds = 1;
  return true;
}

struct Totals {
  uint64_t runs = 0, events = 0, requests = 0, grants = 0, resets = 0, long_delays = 0,
           violations = 0;
  uint64_t excused[5] = {}, fence_regressions = 0, holder_crashes = 0, server_timeouts = 0;
  uint64_t waiter_crashes = 0, waiter_freezes = 0;
  uint64_t faults[8] = {};
  double sim_s = 0;
};

const char kUsage[] =
    "usage: edgelock_sim [--seed S | --seeds N [--from S] [--max-seconds T] [--min-events N]]\n"
    "  [--clients N] [--servers N] [--work lock|lock+keeper|quorum|quorum+keeper|semaphore|\n"
    "   reentrant|cooldown|quota|fair|lock-loop|quorum-loop|semaphore-loop|reentrant-loop|\n"
    "   semaphore+keeper|reentrant+keeper] [--data-loss [--delayed-restart]] [--no-faults]\n"
    "  [--fault-scale X] [--late-replies] [--strict] [--strict-cleanup] [--trace]\n"
    "  [--expect-violation] [--determinism] [--hashes] [--keep-going] [--quiet]\n";

const char* const kFaultNames[] = {"partitions",      "server pauses",  "server restarts",
                                   "client pauses",   "script flushes", "error-reply spells",
                                   "TTL-less holders"};

// One run; returns its trace hash.
uint64_t run_one(uint64_t seed, const Options& opt, std::vector<std::unique_ptr<Fiber>>& fibers,
                 Totals* t, bool* violated, std::string* kind) {
  RunConfig cfg = RunConfig::from_seed(seed, opt.o);
  cfg.print_trace = opt.trace;
  cfg.quiet = opt.quiet;
  while (fibers.size() < static_cast<size_t>(cfg.clients)) fibers.emplace_back(new Fiber());
  std::vector<Fiber*> f;
  for (auto& p : fibers) f.push_back(p.get());
  g_random = Prng(stream_seed(seed, 5));
  World w(cfg, f);
  *violated = !w.run(&client_main);
  *kind = w.checker().failure_kind();
  const RunStats& s = w.stats();
  ++t->runs;
  t->events += s.events;
  t->requests += s.requests;
  t->grants += s.grants;
  t->resets += s.resets;
  t->long_delays += s.long_delays;
  t->violations += *violated ? 1 : 0;
  for (int k = 0; k < 5; ++k) t->excused[k] += s.excused[k];
  t->fence_regressions += s.fence_regressions;
  t->holder_crashes += s.holder_crashes;
  t->waiter_crashes += s.waiter_crashes;
  t->waiter_freezes += s.waiter_freezes;
  t->server_timeouts += s.server_timeouts;
  for (int k = 0; k < 8; ++k) t->faults[k] += s.faults[k];
  t->sim_s += static_cast<double>(s.sim_ns) / 1e9;
  return w.trace_hash();
}

// What the seeds found.
struct Outcome {
  uint64_t first_bad = 0;
  std::string kind;
  std::map<std::string, uint64_t> first_by_kind, count_by_kind;  // --keep-going
};

// Runs `seed` a second time and compares the trace hashes.
bool replays_the_same(uint64_t seed, const Options& opt,
                      std::vector<std::unique_ptr<Fiber>>& fibers, uint64_t hash, bool violated) {
  Totals scratch;
  bool v2 = false;
  std::string k2;
  Options quiet = opt;
  quiet.quiet = true;
  quiet.trace = false;
  const uint64_t h2 = run_one(seed, quiet, fibers, &scratch, &v2, &k2);
  if (h2 == hash && v2 == violated) return true;
  std::fprintf(stderr, "NOT DETERMINISTIC: seed %llu gave trace hashes %016llx and %016llx\n",
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(hash),
               static_cast<unsigned long long>(h2));
  return false;
}

void print_summary(const Totals& t, const Options& opt, double wall, Outcome& out) {
  std::printf(
      "%llu runs (seeds %llu..%llu), %llu events, %.0f s simulated, %llu requests, %llu grants, "
      "%llu violations; %.1f s wall, %.0f events/s\n",
      static_cast<unsigned long long>(t.runs), static_cast<unsigned long long>(opt.from),
      static_cast<unsigned long long>(opt.from + t.runs - 1),
      static_cast<unsigned long long>(t.events), t.sim_s,
      static_cast<unsigned long long>(t.requests), static_cast<unsigned long long>(t.grants),
      static_cast<unsigned long long>(t.violations), wall, static_cast<double>(t.events) / wall);
  std::printf("faults:");
  for (int k = 0; k < 7; ++k)
    std::printf(" %llu %s,", static_cast<unsigned long long>(t.faults[k]), kFaultNames[k]);
  std::printf(
      " %llu connection resets, %llu messages delayed past the TTL, %llu quorum holders crashed "
      "right after a grant, %llu blocked waits timed out by a server\n",
      static_cast<unsigned long long>(t.resets), static_cast<unsigned long long>(t.long_delays),
      static_cast<unsigned long long>(t.holder_crashes),
      static_cast<unsigned long long>(t.server_timeouts));
  if (t.waiter_crashes || t.waiter_freezes) {
    std::printf("fair waiters: %llu died mid-wait, %llu frozen past their waiter timeout\n",
                static_cast<unsigned long long>(t.waiter_crashes),
                static_cast<unsigned long long>(t.waiter_freezes));
  }
  if (t.fence_regressions) {
    std::printf("fences that went back after a restart lost the counters: %llu\n",
                static_cast<unsigned long long>(t.fence_regressions));
  }
  // Only cleanup is ever excused (checker.h, Excuse): each kind counted.
  std::printf("cleanups excused:");
  for (int k = 0; k < 5; ++k) {
    std::printf(" %llu %s%s", static_cast<unsigned long long>(t.excused[k]), kExcuseNames[k],
                k < 4 ? "," : "\n");
  }
  for (const auto& k : out.first_by_kind) {
    std::printf("  %llu x %s, first at seed %llu\n",
                static_cast<unsigned long long>(out.count_by_kind[k.first]), k.first.c_str(),
                static_cast<unsigned long long>(k.second));
  }
  if (out.first_bad) {
    std::printf("first violation: seed %llu (%s)\n", static_cast<unsigned long long>(out.first_bad),
                out.kind.c_str());
  }
}

// Notes a violation; true if the run of seeds should stop.
bool note_violation(uint64_t seed, const std::string& kind, const Options& opt, const char* argv0,
                    Outcome* out) {
  if (opt.keep_going) {
    const std::string label = kind + " (" + work_summary(seed, opt) + ")";
    if (out->first_by_kind.count(label) == 0) out->first_by_kind[label] = seed;
    ++out->count_by_kind[label];
    return false;
  }
  if (out->first_bad != 0) return false;
  out->first_bad = seed;
  out->kind = kind;
  std::fprintf(stderr, "replay: %s --seed %llu%s --trace\n", argv0,
               static_cast<unsigned long long>(seed), opt.flags.c_str());
  return !opt.expect_violation || opt.quiet;
}

int main_impl(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  check_library_scripts();
  std::vector<std::unique_ptr<Fiber>> fibers;
  Totals t;
  Outcome out;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < opt.seeds || (opt.min_events && t.events < opt.min_events); ++i) {
    const uint64_t seed = opt.from + i;
    bool violated = false;
    std::string kind;
    const uint64_t h = run_one(seed, opt, fibers, &t, &violated, &kind);
    if (opt.determinism && !replays_the_same(seed, opt, fibers, h, violated)) return 1;
    if (opt.one || opt.hashes) {
      std::printf("seed %llu: trace hash %016llx\n", static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(h));
    }
    if (violated && note_violation(seed, kind, opt, argv[0], &out)) break;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt.max_seconds > 0 && el > opt.max_seconds) break;
  }
  print_summary(t, opt,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), out);
  if (opt.expect_violation) return out.first_bad ? 0 : 1;
  return out.first_bad ? 1 : 0;
}

}  // namespace
}  // namespace sim
}  // namespace edgelock

int main(int argc, char** argv) { return edgelock::sim::main_impl(argc, argv); }
