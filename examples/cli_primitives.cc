// edgelock semaphore / cooldown: the expiring-permit semaphore and the
// rate limiters (Cooldown, Quota) from the shell, plus --stats output.
// `semaphore -- COMMAND` reuses run's machinery (run_child) with the permit
// as the lease.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"
#include "cli_wait.h"
#include "edgelock/cooldown.h"
#include "edgelock/quota.h"
#include "edgelock/semaphore.h"

namespace cli {

void print_stats(const char* what, const edgelock::Metrics& m) {
  char buf[320];
  const edgelock::Result<size_t> n = edgelock::format_metrics(m, buf, sizeof buf);
  std::fprintf(stderr, "edgelock: stats %s: %s\n", what, n.ok() ? buf : "(too long)");
}

namespace {

using edgelock::Bytes;
using edgelock::ErrorCode;
using edgelock::Nanos;
using edgelock::Permit;
using edgelock::Semaphore;
using edgelock::Status;

void json_key(const Options& o) {
  std::printf("{\"key\":");
  print_json_string(o.key, std::strlen(o.key));
}

// The exit code for a failed semaphore operation, with its message.
int sem_error(const Options& o, const Semaphore& sem, Status s, const char* doing) {
  if (s.code() == ErrorCode::kExpired) {
    expired_line(o, "permit");
  } else if (s.code() == ErrorCode::kBusy) {
    notice_line(o, "%s: all %lld permits in use (the first frees in %lld ms)", o.key,
                static_cast<long long>(o.permits), to_ms(sem.busy_ttl()));
  } else if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    error_line("not the owner of a permit of %s: the id is stale (expired, released or unknown)", o.key);
  } else {
    report_error(sem.connection(), s, doing);
  }
  return exit_code_for(s.code());
}

int sem_count(const Options& o, Semaphore& sem) {
  const edgelock::Result<uint32_t> r = sem.in_use();
  if (!r.ok()) return sem_error(o, sem, r.status(), "count");
  if (o.quiet) return kExitOk;
  if (o.json) {
    json_key(o);
    std::printf(",\"in_use\":%u,\"permits\":%lld}\n", *r, static_cast<long long>(o.permits));
  } else {
    std::printf("%u\n", *r);
  }
  return kExitOk;
}

int sem_release(const Options& o, Semaphore& sem) {
  const Status s = sem.release_id(Bytes::from_cstr(o.release_id));
  if (!s.ok()) return sem_error(o, sem, s, "release");
  if (o.json && !o.quiet) {
    json_key(o);
    std::printf(",\"permit\":");
    print_json_string(o.release_id, std::strlen(o.release_id));
    std::printf(",\"held\":false}\n");
  }
  return kExitOk;
}

void print_permit(const Options& o, const Permit& p) {
  if (o.quiet) return;
  if (!o.json) {
    std::printf("%.*s\n", static_cast<int>(p.id().size), reinterpret_cast<const char*>(p.id().data));
    return;
  }
  json_key(o);
  std::printf(",\"permit\":");
  print_json_string(reinterpret_cast<const char*>(p.id().data), p.id().size);
  std::printf(",\"permits\":%lld,\"ttl_ms\":%lld,\"validity_ms\":%lld}\n", static_cast<long long>(o.permits),
              static_cast<long long>(o.ttl_ms), to_ms(p.remaining()));
}

int cmd_semaphore(const Options& o, edgelock::Connection& conn, Semaphore& sem) {
  if (o.count) return sem_count(o, sem);
  if (o.release_id) return sem_release(o, sem);
  Permit permit;
  // Within --wait and --server-wait; a failure with the permit's fate
  // unknown hands it back (fail closed).
  const Status s = bounded_acquire(
      o, conn.clock(), &conn, [&](Nanos wait) { return sem.acquire(&permit, wait); },
      [&]() {
        if (!permit.id().empty()) permit.release().ignore();
      });
  if (!s.ok()) return sem_error(o, sem, s, "acquire");
  if (!o.child_argv) {
    print_permit(o, permit);
    return kExitOk;
  }
  return run_child(o, permit);
}

int semaphore(const Options& o, edgelock::Connection& conn) {
  Semaphore sem(conn);
  edgelock::SemaphoreOptions so;
  so.permits = static_cast<uint32_t>(o.permits);
  so.ttl = from_ms(o.ttl_ms);
  const Status s = sem.init(Bytes::from_cstr(o.key), so);
  if (!s.ok()) {
    error_line("cannot set up the semaphore: %s", s.to_string());
    return exit_code_for(s.code());
  }
  const int rc = cmd_semaphore(o, conn, sem);
  if (o.stats) {
    print_stats("connection", conn.metrics());
    print_stats("semaphore", sem.metrics());
  }
  return rc;
}

// Allowed with COMMAND: exec it in place (no lease to keep), so its status
// is ours. Stats are printed first; the Redis socket is close-on-exec.
int exec_command(const Options& o) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (setenv("EDGELOCK_KEY", o.key, 1) != 0) {
    error_line("cannot set the environment: %s", std::strerror(errno));
    return 126;
  }
  execvp(o.child_argv[0], o.child_argv);
  const int err = errno;
  error_line("cannot run %s: %s", o.child_argv[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

// Prints the answer; returns the exit code (COMMAND's if allowed and given).
int admitted(const Options& o, const edgelock::Connection& conn, Status s, const edgelock::Admission& a,
             const edgelock::Metrics& m) {
  const bool quota = o.quota != 0;
  if (!s.ok() && s.code() != ErrorCode::kBusy) report_error(conn, s, quota ? "quota" : "cooldown");
  if (o.stats) {
    print_stats("connection", conn.metrics());
    print_stats(quota ? "quota" : "cooldown", m);
  }
  if (!s.ok() && s.code() != ErrorCode::kBusy) return exit_code_for(s.code());
  if (!o.quiet && o.json) {
    json_key(o);
    std::printf(",\"allowed\":%s,\"retry_after_ms\":%lld", s.ok() ? "true" : "false",
                to_ms(a.retry_after));
    if (quota) std::printf(",\"remaining\":%lld", static_cast<long long>(a.remaining));
    std::printf("}\n");
  } else if (!o.quiet && !o.child_argv) {
    if (s.ok()) std::printf("allowed\n");
    else std::printf("retry-after %lld\n", to_ms(a.retry_after));
  } else if (!s.ok()) {
    notice_line(o, "%s: not allowed for %lld ms more", o.key, to_ms(a.retry_after));
  }
  if (!s.ok()) return kExitBusy;
  return o.child_argv ? exec_command(o) : kExitOk;
}

// cooldown waits only when --wait is given (unset = 0, unlike locks).
Nanos admit_wait(const Options& o) { return o.wait_ms < 0 ? Nanos::zero() : from_ms(o.wait_ms); }

int cooldown(const Options& o, edgelock::Connection& conn) {
  edgelock::Admission a;
  if (o.quota != 0) {
    edgelock::Quota q(conn);
    edgelock::QuotaOptions qo;
    qo.limit = o.quota;
    qo.window = from_ms(o.window_ms);
    Status s = q.init(Bytes::from_cstr(o.key), qo);
    if (s.ok()) s = q.take(admit_wait(o), &a);
    return admitted(o, conn, s, a, q.metrics());
  }
  edgelock::Cooldown c(conn);
  edgelock::CooldownOptions co;
  co.period = from_ms(o.period_ms);
  Status s = c.init(Bytes::from_cstr(o.key), co);
  if (s.ok()) s = c.enter(admit_wait(o), &a);
  return admitted(o, conn, s, a, c.metrics());
}

}  // namespace

int dispatch_primitive(const Options& o, edgelock::Connection& conn) {
  if (std::strlen(o.key) > edgelock::kMaxKeyLen) {
    error_line("KEY is longer than %zu bytes", edgelock::kMaxKeyLen);
    return kExitUsage;
  }
  return o.command == Subcommand::kSemaphore ? semaphore(o, conn) : cooldown(o, conn);
}

}  // namespace cli
