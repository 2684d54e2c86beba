// edgelock semaphore / cooldown: the expiring-permit semaphore and the
// rate limiters (Cooldown, Quota) from the shell. `semaphore -- COMMAND`
// reuses run's machinery (run_child) with the permit as the lease.
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

// One cooldown or quota decision (enter / take, --peek or --reset) on
// `gate`, then the answer, the stats and COMMAND if allowed.
template <typename Gate, typename TakeFn, typename PeekFn>
int admit(const Options& o, Target& t, Gate& gate, const char* what, TakeFn take, PeekFn peek) {
  Admission a;
  Status s;
  if (o.reset) {
    s = end_period(gate);
  } else if (o.peek) {
    s = peek(&a);
  } else {
    s = take(admit_wait(o), &a);
  }
  int rc = kExitOk;
  if (!s.ok() && s.code() != ErrorCode::kBusy) {
    rc = s.code() == ErrorCode::kExpired
             ? too_late(o, what)
             : report_error(gate.connection(), error_text(gate), s, what);
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

template <typename B>
int cooldown(const Options& o, B& backend, Target& t) {
  edgelock::Cooldown c(backend);
  edgelock::CooldownOptions co;
  co.period = from_ms(o.period_ms);
  const Status s = c.init(Bytes::from_cstr(o.key), co);
  if (!s.ok()) return fail_with(s.code(), "cannot set up the cooldown: %s", cause_text(s));
  return admit(
      o, t, c, "cooldown", [&](Nanos wait, Admission* a) { return c.enter(wait, a); },
      [&](Admission* a) -> Status {
        const edgelock::Result<edgelock::Millis> r = c.retry_after();
        if (!r.ok()) return r.status();
        a->allowed = r.value() <= edgelock::Millis(0);
        a->retry_after = r.value();
        return Status();
      });
}

template <typename B>
int quota(const Options& o, B& backend, Target& t) {
  edgelock::Quota q(backend);
  edgelock::QuotaOptions qo;
  qo.limit = o.quota;
  qo.window = from_ms(o.window_ms);
  const Status s = q.init(Bytes::from_cstr(o.key), qo);
  if (!s.ok()) return fail_with(s.code(), "cannot set up the quota: %s", cause_text(s));
  return admit(
      o, t, q, "quota", [&](Nanos wait, Admission* a) { return q.take(wait, a); },
      [&](Admission* a) -> Status {
        const edgelock::Result<Admission> r = q.peek();
        if (r.ok()) *a = r.value();
        return r.status();
      });
}

}  // namespace

int dispatch_primitive(const Options& o, Target& t) {
  if (o.command == Subcommand::kSemaphore) {
    return on_target<Semaphore>(t, "semaphore", [&](auto& b) { return semaphore(o, b, t); });
  }
  if (o.quota != 0)
    return on_target<edgelock::Quota>(t, "quota", [&](auto& b) { return quota(o, b, t); });
  return on_target<edgelock::Cooldown>(t, "cooldown", [&](auto& b) { return cooldown(o, b, t); });
}

}  // namespace cli
