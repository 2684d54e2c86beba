#pragma once
// The edgelock command-line tool: options, exit codes and what the
// subcommands share.
//
// The tool is a program built on the library; it may print and use the
// heap freely, but it follows the library's rules where they matter: no
// exceptions, monotonic time, a lease it cannot prove is treated as lost.

#include <chrono>
#include <cstdint>

#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace cli {

// Exit codes (docs/cli.md, the man page and --help list them).
constexpr int kExitOk = 0;
constexpr int kExitBusy = 1;      // not acquired within --wait; cooldown not allowed
constexpr int kExitUsage = 2;     // usage or invalid argument
constexpr int kExitServer = 3;    // connection, auth, TLS or server error, no answer
constexpr int kExitLost = 4;      // lease lost while COMMAND ran, or before it started
constexpr int kExitNotOwner = 5;  // release/extend with a stale token

constexpr int kMaxUrls = 16;
// --wait forever (also the default for the lock subcommands).
constexpr int64_t kForeverMs = -1;

enum class Subcommand { kNone, kRun, kAcquire, kRelease, kExtend, kStatus, kSemaphore, kCooldown };

// The flags count whole milliseconds; the library takes std::chrono
// durations. These convert at that boundary.
inline edgelock::Millis from_ms(int64_t ms) { return edgelock::Millis(ms); }
// For printing: whole ms, rounded down (a validity is never overstated).
inline long long to_ms(edgelock::Nanos d) {
  return static_cast<long long>(std::chrono::floor<edgelock::Millis>(d).count());
}

struct Options {
  const char* urls[kMaxUrls] = {};
  int url_count = 0;
  int64_t ttl_ms = 10000;
  bool wait_given = false;         // -w given (cooldown waits only then)
  int64_t wait_ms = kForeverMs;    // kForeverMs = wait forever
  int64_t server_wait_ms = 10000;  // give up after the server is silent this long
  int64_t grace_ms = -1;           // -1: effective_grace_ms() picks it
  const char* tls_ca = nullptr;
  const char* tls_cert = nullptr;
  const char* tls_key = nullptr;
  const char* tls_server_name = nullptr;
  bool json = false;
  bool quiet = false;
  Subcommand command = Subcommand::kNone;
  const char* key = nullptr;
  const char* token = nullptr;
  char** child_argv = nullptr;  // NULL-terminated: run, semaphore, cooldown
  bool stats = false;           // --stats: counters on stderr at exit
  // -E N: the exit status for "busy" (held, no permit, not allowed) where
  // COMMAND's own statuses would overlap edgelock's (flock's -E); -1: 1.
  int64_t conflict_exit = -1;
  // semaphore
  int64_t permits = 0;               // --permits N (required)
  bool count = false;                // --count: print permits in use
  const char* release_id = nullptr;  // --release PERMIT_ID
  // cooldown
  int64_t period_ms = 0;  // --period MS
  int64_t quota = 0;      // --quota M (with --window)
  int64_t window_ms = 0;  // --window MS
  bool peek = false;      // --peek: ask without taking
  bool reset = false;     // --reset: end the period / window now
  // Sentinel and Cluster
  int64_t wait_replicas = 0;        // --wait-replicas N: WAIT after grants
  int64_t replica_timeout_ms = -1;  // --replica-timeout MS (-1: the library's 200)
  // --fair: a FairLock (first come, first served) instead of a Lock
  bool fair = false;
  int64_t waiter_timeout_ms = -1;  // --waiter-timeout MS (-1: the library's 2000)
};

// Parses argv and the environment. Returns -1 to go on, or an exit code
// (after --help, --version, or a usage error already reported).
int parse_args(int argc, char** argv, Options* out);
// --version: the tool's and the library's build (usage.cc).
void print_version();
// --help (usage.cc).
void print_usage();

// run's --grace: as given, else min(2000, TTL/4). It comes out of the
// validity (SIGTERM that long before it ends), so parse_args refuses one
// above TTL/2.
int64_t effective_grace_ms(const Options& o);

// The descriptors open before main() pass on to COMMAND; close_own_fds()
// closes every other one (Redis sockets included) before an exec, except
// `keep` (a close-on-exec pipe that reports a failed exec).
void close_own_fds(int keep = -1);

}  // namespace cli
