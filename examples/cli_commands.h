#pragma once
// edgelock: the subcommands that work the same for a single-server Lock and
// a QuorumLock (templates over the lock type).

#include <cstdio>
#include <cstring>

#include "cli.h"
#include "cli_wait.h"

namespace edgelock {
class QuorumLock;  // defined where the library has it (cli_quorum.cc)
}  // namespace edgelock

namespace cli {

// One error line for a failed lock operation (overloaded per lock type).
void report_lock_error(const edgelock::Lock& lock, edgelock::Status s, const char* doing);
void report_lock_error(const edgelock::QuorumLock& lock, edgelock::Status s, const char* doing);

// {"key":..,"token":..[,"fence":..],"ttl_ms":..,"validity_ms":..,"held":..}
template <typename LockT>
void print_json_lock(const Options& o, const LockT& lock, bool with_fence) {
  std::printf("{\"key\":");
  print_json_string(o.key, std::strlen(o.key));
  std::printf(",\"token\":");
  print_json_string(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  if (with_fence) std::printf(",\"fence\":%llu", static_cast<unsigned long long>(lock.fence()));
  std::printf(",\"ttl_ms\":%lld,\"validity_ms\":%lld,\"held\":%s}\n", static_cast<long long>(o.ttl_ms),
              to_ms(lock.remaining()), lock.held() ? "true" : "false");
}

template <typename LockT>
int lock_error(const Options& o, const LockT& lock, edgelock::Status s, const char* doing) {
  using edgelock::ErrorCode;
  if (s.code() == ErrorCode::kExpired) {
    expired_line(o, doing);
  } else if (s.code() == ErrorCode::kBusy) {
    if (o.wait_ms == 0) {
      notice_line(o, "%s is held by another owner (%lld ms left)", o.key,
                  to_ms(lock.busy_ttl()));
    } else {
      notice_line(o, "%s not acquired within %lld ms", o.key, static_cast<long long>(o.wait_ms));
    }
  } else if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    error_line("not the owner of %s: the token is stale (expired, released or taken over)", o.key);
  } else {
    report_lock_error(lock, s, doing);
    unknown_outcome_line(o, s, doing);
  }
  return exit_code_for(s.code());
}

// Acquires within --wait and --server-wait (cli_wait.h). `conn` is the
// lock's only connection (its events show when the server answers), or
// null. A failure other than busy is cleaned up by release() before
// returning: the grant may have landed with its reply lost.
template <typename LockT>
int acquire(const Options& o, LockT& lock, edgelock::Clock& clock, edgelock::Connection* conn) {
  const edgelock::Status s = bounded_acquire(
      o, clock, conn, [&](edgelock::Nanos wait) { return lock.acquire(wait); },
      [&]() { lock.release().ignore(); });
  return s.ok() ? kExitOk : lock_error(o, lock, s, "acquire");
}

template <typename LockT>
int cmd_acquire(const Options& o, LockT& lock, edgelock::Clock& clock, edgelock::Connection* conn) {
  const int rc = acquire(o, lock, clock, conn);
  if (rc != kExitOk || o.quiet) return rc;
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

}  // namespace cli
