#pragma once
// The edgelock command-line tool: shared declarations.
//
// The tool is an example program built on the library; it may print and
// use the heap freely, but it still follows the library's rules where they
// matter: no exceptions, monotonic time, a lease it cannot prove is treated
// as lost.

#include <chrono>
#include <cstdint>

#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace cli {

// Exit codes (documented in --help and docs/cli.md).
constexpr int kExitOk = 0;
constexpr int kExitBusy = 1;        // not acquired within --wait
constexpr int kExitUsage = 2;       // usage or invalid argument
constexpr int kExitServer = 3;      // connection, auth, TLS or server error, no answer
                                    // within --server-wait, a reply too large
constexpr int kExitLost = 4;        // lease lost during run
constexpr int kExitNotOwner = 5;    // release/extend with a stale token

constexpr int kMaxUrls = 16;

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
  int64_t wait_ms = -1;  // -1 = wait forever
  int64_t server_wait_ms = 10000;  // give up after the server is silent this long
  int64_t grace_ms = -1;  // -1: effective_grace_ms() picks it
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
  bool stats = false;            // --stats: metrics on stderr at exit
  // semaphore
  int64_t permits = 0;           // --permits N (required)
  bool count = false;            // --count: print permits in use
  const char* release_id = nullptr;  // --release PERMIT_ID
  // cooldown
  int64_t period_ms = 0;         // --period MS
  int64_t quota = 0;             // --quota M (with --window)
  int64_t window_ms = 0;         // --window MS
};

// Parses argv. Returns -1 to go on, or an exit code (after --help,
// --version, or a usage error already reported on stderr).
int parse_args(int argc, char** argv, Options* out);

// "edgelock: <formatted text>\n" on stderr. Always printed, even with -q.
__attribute__((format(printf, 1, 2))) void error_line(const char* fmt, ...);
// As error_line, but suppressed by -q (notices, not errors).
__attribute__((format(printf, 2, 3))) void notice_line(const Options& o, const char* fmt, ...);

// One error line for a failed operation on `conn`: "<doing> failed at
// host:port: <cause>: <server text>" (or the transport's own line).
void report_error(const edgelock::Connection& conn, edgelock::Status s, const char* doing);

// The exit code for a library error. Only the tool's own checks of what the
// caller supplied exit 2: a library error is about the server or the link
// (a reply too large for the fixed capacities, a grant too late) and exits 3.
int exit_code_for(edgelock::ErrorCode code);
// The error line for kExpired: the server answered, but only after the
// lease (or permit, or new TTL) it set had run out locally. `doing` is
// "acquire", "extend" or "permit".
void expired_line(const Options& o, const char* doing);
// After a failed release or extend whose request may have run (no reply):
// a notice that says so and what to assume.
void unknown_outcome_line(const Options& o, edgelock::Status s, const char* doing);

// Sets up and connects `conn` to `url` with the tool's options (TLS files,
// EDGELOCK_PASSWORD, timeouts derived from the TTL). Reports errors on
// stderr; returns kExitOk or the exit code to use.
int open_connection(const Options& o, const char* url, edgelock::Connection* conn);
// The two halves of open_connection(): setup (no I/O) and connect now
// (reporting the error on stderr only if `report`).
int setup_connection(const Options& o, const char* url, edgelock::Connection* conn);
int connect_now(edgelock::Connection* conn, bool report);

// Several --url: a quorum lock (exits 2 in builds without QuorumLock).
int dispatch_quorum(const Options& o);
// "quorum" or "" for --version.
const char* quorum_feature();

// Writes `s` as a JSON string literal (quoted, escaped) to stdout.
void print_json_string(const char* s, size_t n);

// semaphore and cooldown on one connection (cli_primitives.cc).
int dispatch_primitive(const Options& o, edgelock::Connection& conn);

// --stats: "edgelock: stats WHAT: name=value ..." on stderr.
void print_stats(const char* what, const edgelock::Metrics& m);

// run's --grace: as given, else min(2000, TTL/4). It comes out of the
// validity (SIGTERM that long before it ends), so parse_args refuses one
// above TTL/2.
int64_t effective_grace_ms(const Options& o);

// The run subcommand, with the lease (Lock, QuorumLock, Permit) already
// acquired: runs COMMAND, keeps the lease, releases it. Returns the exit
// code.
int run_child(const Options& o, edgelock::Lease& lease);

}  // namespace cli
