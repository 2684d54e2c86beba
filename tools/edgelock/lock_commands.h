#pragma once
// edgelock: the subcommands that work the same for a Lock or a FairLock
// (on any back end) and a QuorumLock: templates over the lock type.

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "handles.h"
#include "report.h"
#include "target.h"
#include "wait.h"

namespace edgelock {
class QuorumLock;  // quorum.cc
}  // namespace edgelock

namespace cli {

// One error line for a failed lock operation (overloaded per lock type);
// records the outcome and returns the exit code.
int report_lock_error(const edgelock::Lock& lock, edgelock::Status s, const char* doing);
int report_lock_error(const edgelock::FairLock& lock, edgelock::Status s, const char* doing);
int report_lock_error(const edgelock::QuorumLock& lock, edgelock::Status s, const char* doing);

// The error line for a grant or renewal that came too late to use (kExpired):
// the server answered, but only after the lease (or permit, or new TTL) it
// set had run out locally. `what` is "acquire", "extend", "permit",
// "cooldown" or "quota".
int too_late(const Options& o, const char* what);
// After a failed release or extend whose request may have run (no reply):
// a notice that says so and what to assume.
void unknown_outcome_line(const Options& o, edgelock::Status s, const char* doing);

// {"key","token"[,"fence"],"ttl_ms","validity_ms","held","exit"}
template <typename LockT>
void print_json_lock(const Options& o, const LockT& lock, bool with_fence) {
  JsonObject j;
  j.str("key", o.key)
      .str("token", reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  if (with_fence) j.num("fence", static_cast<long long>(lock.fence()));
  j.num("ttl_ms", o.ttl_ms).num("validity_ms", to_ms(lock.remaining())).flag("held", lock.held());
  j.end(kExitOk);
}

template <typename LockT>
int lock_error(const Options& o, const LockT& lock, edgelock::Status s, const char* doing) {
  using edgelock::ErrorCode;
  if (s.code() == ErrorCode::kExpired) return too_late(o, doing);
  if (s.code() == ErrorCode::kBusy) {
    if (std::is_same<LockT, edgelock::FairLock>::value && o.wait_ms == 0) {
      return fail("busy", kExitBusy, "%s is held by another owner, or others are queued for it",
                  o.key);
    }
    if (o.wait_ms == 0) {
      return fail("busy", kExitBusy, "%s is held by another owner (%lld ms left)", o.key,
                  to_ms(lock.busy_ttl()));
    }
    return fail("busy", kExitBusy, "%s is still held by another owner after waiting %lld ms", o.key,
                static_cast<long long>(o.wait_ms));
  }
  if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    return fail("not_owner", kExitNotOwner,
                "not the owner of %s: the token is stale (expired, released or taken over)", o.key);
  }
  const int rc = report_lock_error(lock, s, doing);
  unknown_outcome_line(o, s, doing);
  return rc;
}

// After a busy answer: names the holder's kind when the key is not a
// string (a lock of another library, e.g. a hash-based one), as a notice.
void name_foreign_holder(edgelock::Connection& conn, const char* key);

// One slice of a wait (wait.h). A FairLock keeps its place in the queue
// from one slice to the next; give_up() leaves it when the wait is over.
template <typename LockT>
edgelock::Status acquire_slice(LockT& lock, edgelock::Nanos wait) {
  return lock.acquire(wait);
}
inline edgelock::Status acquire_slice(edgelock::FairLock& lock, edgelock::Nanos wait) {
  return lock.acquire(wait, edgelock::GiveUp::kStay);
}
template <typename LockT>
void give_up(LockT&) {}
inline void give_up(edgelock::FairLock& lock) {
  if (lock.queued()) lock.leave().ignore();
}

// Acquires within --wait and --server-wait (wait.h). `conn` is the lock's
// only connection (its events show when the server answers), or null. A
// failure other than busy is cleaned up by release() before returning: the
// grant may have landed with its reply lost.
template <typename LockT>
int acquire(const Options& o, LockT& lock, edgelock::Clock& clock, edgelock::Connection* conn) {
  constexpr bool quorum = std::is_same<LockT, edgelock::QuorumLock>::value;
  const WaitResult r = bounded_acquire(
      o, clock, conn, quorum, [&](edgelock::Nanos wait) { return acquire_slice(lock, wait); },
      [&]() { lock.release().ignore(); });
  if (r.status.ok()) return kExitOk;
  if (r.status.code() == edgelock::ErrorCode::kBusy && conn) name_foreign_holder(*conn, o.key);
  give_up(lock);
  const int rc = lock_error(o, lock, r.status, "acquire");
  return r.silent ? report_silent(o, r) : rc;
}

// Prints "TOKEN FENCE" (also with -q: a later release or extend needs it).
template <typename LockT>
int cmd_acquire(const Options& o, LockT& lock, edgelock::Clock& clock, edgelock::Connection* conn) {
  const int rc = acquire(o, lock, clock, conn);
  if (rc != kExitOk) return rc;
  if (o.json) {
    print_json_lock(o, lock, true);
  } else {
    std::printf("%.*s %llu\n", static_cast<int>(lock.token().size),
                reinterpret_cast<const char*>(lock.token().data),
                static_cast<unsigned long long>(lock.fence()));
  }
  return kExitOk;
}

template <typename LockT>
int cmd_run(const Options& o, LockT& lock, edgelock::Clock& clock, edgelock::Connection* conn) {
  const int rc = acquire(o, lock, clock, conn);
  return rc != kExitOk ? rc : run_child(o, lock);
}

// release, extend, status and acquire/run for a Lock (a FairLock with
// --fair) on any back end.
int lock_command(const Options& o, Target& target);

}  // namespace cli
