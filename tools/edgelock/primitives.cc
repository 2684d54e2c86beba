// edgelock semaphore / cooldown: the expiring-permit semaphore and the
// rate limiter (RateLimiter: --period is limit 1, --quota M per --window)
// from the shell. `semaphore -- COMMAND` reuses run's machinery
// (run_child) with the permit as the lease.
#include "primitives.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "handles.h"
#include "lock_commands.h"
#include "report.h"
#include "wait.h"

namespace cli {

namespace {

using edgelock::Admission;
using edgelock::Bytes;
using edgelock::ErrorCode;
using edgelock::Nanos;
using edgelock::Permit;
using edgelock::RateLimiter;
using edgelock::Semaphore;
using edgelock::Status;

// Runs fn(back end): the plain connection when the target is one (the
// primitives' direct paths), else the Sentinel or Cluster.
template <typename Handle, typename Fn>
int on_target(Target& t, const char*, Fn fn) {
  if (edgelock::Connection* conn = t.direct()) return fn(*conn);
  return fn(t.backend());
}

// The exit code for a failed semaphore operation, with its message.
int sem_error(const Options& o, const Semaphore& sem, Status s, const char* doing) {
  if (s.code() == ErrorCode::kExpired) return too_late(o, "permit");
  if (s.code() == ErrorCode::kBusy) {
    return fail("busy", kExitBusy, "%s: all %lld permits in use (the first frees in %lld ms)",
                o.key, static_cast<long long>(o.permits), to_ms(sem.busy_ttl()));
  }
  if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    return fail("not_owner", kExitNotOwner,
                "not the owner of a permit of %s: the id is stale (expired, released or unknown)",
                o.key);
  }
  return report_error(serving(sem.key()), error_text(sem), s, doing);
}

int sem_count(const Options& o, Semaphore& sem) {
  const edgelock::Result<uint32_t> r = sem.in_use();
  if (!r.ok()) return sem_error(o, sem, r.status(), "count");
  if (o.json) {
    JsonObject().str("key", o.key).num("in_use", *r).num("permits", o.permits).end(kExitOk);
  } else {
    std::printf("%u\n", *r);
  }
  return kExitOk;
}

int sem_release(const Options& o, Semaphore& sem) {
  const Status s = sem.release_id(Bytes::from_cstr(o.release_id));
  if (!s.ok()) return sem_error(o, sem, s, "release");
  if (o.json)
    JsonObject().str("key", o.key).str("permit", o.release_id).flag("held", false).end(kExitOk);
  return kExitOk;
}

// The permit id (also with -q: --release needs it later).
void print_permit(const Options& o, const Permit& p) {
  const edgelock::Bytes id = p.token();
  if (!o.json) {
    std::printf("%.*s\n", static_cast<int>(id.size), reinterpret_cast<const char*>(id.data));
    return;
  }
  JsonObject()
      .str("key", o.key)
      .str("permit", reinterpret_cast<const char*>(id.data), id.size)
      .num("permits", o.permits)
      .num("ttl_ms", o.ttl_ms)
      .num("validity_ms", to_ms(p.remaining()))
      .end(kExitOk);
}

int cmd_semaphore(const Options& o, Target& t, Semaphore& sem) {
  if (o.count) return sem_count(o, sem);
  if (o.release_id) return sem_release(o, sem);
  Permit permit;
  // Within --wait and --server-wait; a failure with the permit's fate
  // unknown hands it back (fail closed).
  const WaitResult r = bounded_acquire(
      o, t.clock(), t.direct(), false, [&](Nanos wait) { return sem.acquire(&permit, wait); },
      [&]() {
        if (!permit.token().empty()) permit.release().ignore();
      });
  if (!r.status.ok()) {
    const int rc = sem_error(o, sem, r.status, "acquire");
    return r.silent ? report_silent(o, r) : rc;
  }
  if (!o.child_argv) {
    print_permit(o, permit);
    return kExitOk;
  }
  return run_child(o, permit);
}

template <typename B>
int semaphore(const Options& o, B& backend, Target& t) {
  Semaphore sem(backend);
  edgelock::SemaphoreOptions so;
  so.permits = static_cast<uint32_t>(o.permits);
  so.ttl = from_ms(o.ttl_ms);
  const Status s = sem.init(Bytes::from_cstr(o.key), so);
  if (!s.ok()) return fail_with(s.code(), "cannot set up the semaphore: %s", cause_text(s));
  const int rc = cmd_semaphore(o, t, sem);
  if (o.stats) t.print_stats(o.key);
  return rc;
}

// Allowed with COMMAND: exec it in place (no lease to keep), so its status
// is ours. Stats are printed first.
int exec_command(const Options& o) {
  std::fflush(stdout);
  std::fflush(stderr);
  close_own_fds();
  if (setenv("EDGELOCK_KEY", o.key, 1) != 0) {
    return fail("internal", 126, "cannot set the environment: %s", std::strerror(errno));
  }
  execvp(o.child_argv[0], o.child_argv);
  const int err = errno;
  return fail("internal", err == ENOENT ? 127 : 126, "cannot run %s: %s", o.child_argv[0],
              std::strerror(err));
}

// Prints the answer: "allowed" or "retry-after MS" (JSON: the admission).
// Returns 0 if allowed, 1 if not.
int print_admission(const Options& o, bool allowed, const Admission& a) {
  const int rc = allowed ? kExitOk : kExitBusy;
  if (!allowed) note_busy();
  // Allowed with COMMAND: stdout is COMMAND's; an object follows only if it
  // cannot be run.
  if (o.json && !(allowed && o.child_argv)) {
    JsonObject j;
    j.str("key", o.key).flag("allowed", allowed).num("retry_after_ms", a.retry_after.count());
    if (o.quota != 0) j.num("remaining", a.remaining);
    j.end(allowed ? kExitOk : busy_exit(), "busy");
  } else if (!o.child_argv) {
    if (allowed) std::printf("allowed\n");
    else std::printf("retry-after %lld\n", static_cast<long long>(a.retry_after.count()));
  } else if (!allowed) {
    notice_line("%s: not allowed for %lld ms more", o.key,
                static_cast<long long>(a.retry_after.count()));
  }
  return rc;
}

// cooldown waits only when --wait is given (unlike locks).
Nanos admit_wait(const Options& o) {
  if (!o.wait_given) return Nanos::zero();
  return o.wait_ms == kForeverMs ? edgelock::kForever : Nanos(from_ms(o.wait_ms));
}

// --peek: what is left. A cooldown (--period) says "allowed" once no time
// is left to wait.
Status peek(const Options& o, RateLimiter& limiter, Admission* a) {
  const edgelock::Result<Admission> r = limiter.peek();
  if (!r.ok()) return r.status();
  *a = r.value();
  if (o.quota == 0) a->allowed = a->retry_after <= edgelock::Millis(0);
  return Status();
}

// One cooldown or quota decision (acquire, --peek or --reset) on
// `limiter`, then the answer, the stats and COMMAND if allowed.
int admit(const Options& o, Target& t, RateLimiter& limiter, const char* what) {
  Admission a;
  Status s;
  if (o.reset) {
    s = end_period(limiter);
  } else if (o.peek) {
    s = peek(o, limiter, &a);
  } else {
    s = limiter.acquire(admit_wait(o), &a);
  }
  int rc = kExitOk;
  if (!s.ok() && s.code() != ErrorCode::kBusy) {
    rc = s.code() == ErrorCode::kExpired
             ? too_late(o, what)
             : report_error(serving(limiter.key()), error_text(limiter), s, what);
  }
  if (o.stats) t.print_stats(o.key);
  if (rc != kExitOk) return rc;
  if (o.reset) {
    if (o.json) JsonObject().str("key", o.key).flag("reset", true).end(kExitOk);
    return kExitOk;
  }
  rc = print_admission(o, s.ok() && (o.peek ? a.allowed : true), a);
  return rc == kExitOk && o.child_argv ? exec_command(o) : rc;
}

// cooldown: --period MS is limit 1 per period; --quota M --window MS.
template <typename B>
int rate_limit(const Options& o, B& backend, Target& t) {
  RateLimiter limiter(backend);
  edgelock::RateLimiterOptions ro;
  const bool quota = o.quota != 0;
  ro.limit = quota ? o.quota : 1;
  ro.window = from_ms(quota ? o.window_ms : o.period_ms);
  const char* what = quota ? "quota" : "cooldown";
  const Status s = limiter.init(Bytes::from_cstr(o.key), ro);
  if (!s.ok()) return fail_with(s.code(), "cannot set up the %s: %s", what, cause_text(s));
  return admit(o, t, limiter, what);
}

}  // namespace

int dispatch_primitive(const Options& o, Target& t) {
  if (o.command == Subcommand::kSemaphore) {
    return on_target<Semaphore>(t, "semaphore", [&](auto& b) { return semaphore(o, b, t); });
  }
  return on_target<RateLimiter>(t, o.quota != 0 ? "quota" : "cooldown",
                                [&](auto& b) { return rate_limit(o, b, t); });
}

}  // namespace cli
