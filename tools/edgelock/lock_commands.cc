// edgelock: acquire, run, release, extend and status on one back end (a
// server, the primary behind Sentinel, or a Cluster).
#include "lock_commands.h"

#include <cstdio>
#include <cstring>

namespace cli {

using edgelock::Bytes;
using edgelock::ErrorCode;
using edgelock::Lock;
using edgelock::Status;

int report_lock_error(const Lock& lock, Status s, const char* doing) {
  return report_error(serving(lock.key()), error_text(lock), s, doing);
}

int report_lock_error(const edgelock::FairLock& lock, Status s, const char* doing) {
  return report_error(serving(lock.key()), error_text(lock), s, doing);
}

void name_foreign_holder(edgelock::Connection& conn, const char* key) {
  const edgelock::Bytes args[2] = {edgelock::Bytes::from_cstr("TYPE"),
                                   edgelock::Bytes::from_cstr(key)};
  const edgelock::Result<const edgelock::Reply*> r =
      conn.command(args, edgelock::Deadline::after(conn.clock(), conn.options().command_timeout));
  if (!r.ok() || r.value()->type != edgelock::ReplyType::kStatus) return;
  const char* type = r.value()->str;
  if (std::strcmp(type, "string") == 0 || std::strcmp(type, "none") == 0) return;
  notice_line("%s is a %s key: held by a lock of another kind (not edgelock's or redis-py's)", key,
              type);
}

int too_late(const Options& o, const char* what) {
  const long long ttl = static_cast<long long>(o.ttl_ms);
  if (std::strcmp(what, "extend") == 0) {
    return fail("too_late", kExitServer,
                "%s: extended too late: the new %lld ms TTL ran out before the reply arrived; %s "
                "may be free"
                " already",
                o.key, ttl, o.key);
  }
  if (std::strcmp(what, "cooldown") == 0 || std::strcmp(what, "quota") == 0) {
    return fail(
        "too_late", kExitServer,
        "%s: allowed too late: the answer arrived after the %s it was counted in could have ended;"
        " not acted on",
        o.key, what[0] == 'c' ? "period" : "window");
  }
  return fail(
      "too_late", kExitServer,
      "%s: %s too late: the %lld ms lease ran out before the reply arrived (the round trip took"
      " longer than --ttl allows); handed back",
      o.key, std::strcmp(what, "permit") == 0 ? "permit granted" : "granted", ttl);
}

void unknown_outcome_line(const Options& o, Status s, const char* doing) {
  const ErrorCode c = s.code();
  if (c != ErrorCode::kTimeout && c != ErrorCode::kIo && c != ErrorCode::kConnectionClosed) return;
  if (std::strcmp(doing, "release") == 0) {
    note_unknown_outcome();
    notice_line("%s: the release may or may not have happened (no reply); releasing again is safe",
                o.key);
  } else if (std::strcmp(doing, "extend") == 0) {
    note_unknown_outcome();
    notice_line(
        "%s: the extend may or may not have happened (no reply); count on the earlier expiry",
        o.key);
  }
}

namespace {

template <typename LockT>
int adopt_token(const Options& o, LockT& lock) {
  if (!lock.adopt(Bytes::from_cstr(o.token)).ok()) {
    return fail("usage", kExitUsage, "TOKEN must be 1..%zu bytes", edgelock::kMaxTokenLen);
  }
  return kExitOk;
}

template <typename LockT>
int cmd_release(const Options& o, LockT& lock) {
  int rc = adopt_token(o, lock);
  if (rc != kExitOk) return rc;
  const Status s = lock.release();
  if (!s.ok()) return lock_error(o, lock, s, "release");
  if (o.json) JsonObject().str("key", o.key).str("token", o.token).flag("held", false).end(kExitOk);
  return kExitOk;
}

template <typename LockT>
int cmd_extend(const Options& o, LockT& lock) {
  int rc = adopt_token(o, lock);
  if (rc != kExitOk) return rc;
  const Status s = renew(lock);  // owner-checked: TTL := --ttl
  if (!s.ok()) return lock_error(o, lock, s, "extend");
  if (o.json) print_json_lock(o, lock, false);
  return kExitOk;
}

// "held TTL_MS" or "free" (also with -q: it is the answer asked for).
template <typename LockT>
int cmd_status(const Options& o, LockT& lock) {
  const edgelock::Result<edgelock::KeyStatus> r = lock.status();
  if (!r.ok()) return lock_error(o, lock, r.status(), "status");
  const long long ttl_ms = !r->held     ? 0
                           : r->expires ? to_ms(r->ttl)
                                        : -1;  // -1: held without expiry
  if (o.json) {
    JsonObject().str("key", o.key).flag("held", r->held).num("ttl_ms", ttl_ms).end(kExitOk);
  } else if (r->held) {
    std::printf("held %lld\n", ttl_ms);
  } else {
    std::printf("free\n");
  }
  return kExitOk;
}

template <typename LockT>
int run_lock_command(const Options& o, LockT& lock, Target& t) {
  switch (o.command) {
    case Subcommand::kRun: return cmd_run(o, lock, t.clock(), t.direct());
    case Subcommand::kAcquire: return cmd_acquire(o, lock, t.clock(), t.direct());
    case Subcommand::kRelease: return cmd_release(o, lock);
    case Subcommand::kExtend: return cmd_extend(o, lock);
    case Subcommand::kStatus: return cmd_status(o, lock);
    default: break;
  }
  return kExitUsage;
}

// Sets the lock up (reporting a failure) and runs the subcommand.
template <typename LockT, typename Opts>
int with_lock(const Options& o, Target& target, LockT& lock, const Opts& lo) {
  const Status s = lock.init(Bytes::from_cstr(o.key), lo);
  if (!s.ok()) {
    if (s.code() == ErrorCode::kInvalidArgument && target.topology() == Topology::kCluster) {
      return fail("usage", kExitUsage, "KEY '%s' cannot be used in a cluster: %s", o.key,
                  error_text(lock));
    }
    return fail_with(s.code(), "cannot set up the lock: %s", cause_text(s));
  }
  const int rc = run_lock_command(o, lock, target);
  if (o.stats) target.print_stats(o.key);
  return rc;
}

}  // namespace

int lock_command(const Options& o, Target& target) {
  if (o.fair) {
    edgelock::FairLock lock(target.backend());
    edgelock::FairLockOptions fo;
    fo.ttl = from_ms(o.ttl_ms);
    if (o.waiter_timeout_ms >= 0) fo.waiter_timeout = from_ms(o.waiter_timeout_ms);
    return with_lock(o, target, lock, fo);
  }
  Lock lock(target.backend());
  edgelock::LockOptions lo;
  lo.ttl = from_ms(o.ttl_ms);
  return with_lock(o, target, lock, lo);
}

}  // namespace cli
