// edgelock: a Redis lock from the shell. See --help and docs/cli.md.
#include <cstdio>
#include <cstring>

#include "cli.h"

namespace cli {
namespace {

using edgelock::Bytes;
using edgelock::ErrorCode;
using edgelock::Lock;
using edgelock::Status;

void print_token_fields(const Lock& lock) {
  std::printf(",\"token\":");
  print_json_string(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
}

// {"key":..,"token":..,"fence":..,"ttl_ms":..,"validity_ms":..,"held":..}
void print_json_lock(const Options& o, const Lock& lock, bool with_fence) {
  std::printf("{\"key\":");
  print_json_string(o.key, std::strlen(o.key));
  print_token_fields(lock);
  if (with_fence) std::printf(",\"fence\":%llu", static_cast<unsigned long long>(lock.fence()));
  std::printf(",\"ttl_ms\":%lld,\"validity_ms\":%lld,\"held\":%s}\n", static_cast<long long>(o.ttl_ms),
              static_cast<long long>(edgelock::to_millis(lock.remaining())), lock.held() ? "true" : "false");
}

int lock_error(const Options& o, const Lock& lock, Status s, const char* doing) {
  if (s.code() == ErrorCode::kBusy || s.code() == ErrorCode::kExpired) {
    if (o.wait_ms == 0) {
      notice_line(o, "%s is held by another owner (%lld ms left)", o.key,
                  static_cast<long long>(lock.busy_ttl_ms()));
    } else {
      notice_line(o, "%s not acquired within %lld ms", o.key, static_cast<long long>(o.wait_ms));
    }
  } else if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    error_line("not the owner of %s: the token is stale (expired, released or taken over)", o.key);
  } else {
    report_error(lock.connection(), s, doing);
  }
  return exit_code_for(s.code());
}

int acquire(const Options& o, Lock& lock) {
  const edgelock::Nanos wait = o.wait_ms < 0 ? -1 : edgelock::millis(o.wait_ms);
  const Status s = lock.acquire(wait);
  if (!s.ok()) return lock_error(o, lock, s, "acquire");
  return kExitOk;
}

int cmd_acquire(const Options& o, Lock& lock) {
  const int rc = acquire(o, lock);
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

int adopt_token(const Options& o, Lock& lock) {
  if (!lock.adopt(Bytes::from_cstr(o.token)).ok()) {
    error_line("TOKEN must be 1..%zu bytes", edgelock::kMaxTokenLen);
    return kExitUsage;
  }
  return kExitOk;
}

int cmd_release(const Options& o, Lock& lock) {
  int rc = adopt_token(o, lock);
  if (rc != kExitOk) return rc;
  const Status s = lock.release();
  if (!s.ok()) return lock_error(o, lock, s, "release");
  if (o.json && !o.quiet) {
    std::printf("{\"key\":");
    print_json_string(o.key, std::strlen(o.key));
    std::printf(",\"token\":");
    print_json_string(o.token, std::strlen(o.token));
    std::printf(",\"held\":false}\n");
  }
  return kExitOk;
}

int cmd_extend(const Options& o, Lock& lock) {
  int rc = adopt_token(o, lock);
  if (rc != kExitOk) return rc;
  const Status s = lock.reacquire();  // owner-checked: TTL := --ttl
  if (!s.ok()) return lock_error(o, lock, s, "extend");
  if (o.json && !o.quiet) print_json_lock(o, lock, false);
  return kExitOk;
}

int cmd_status(const Options& o, Lock& lock) {
  const edgelock::Result<edgelock::KeyStatus> r = lock.status();
  if (!r.ok()) return lock_error(o, lock, r.status(), "status");
  if (o.quiet) return kExitOk;
  if (o.json) {
    std::printf("{\"key\":");
    print_json_string(o.key, std::strlen(o.key));
    std::printf(",\"held\":%s,\"ttl_ms\":%lld}\n", r->held ? "true" : "false",
                static_cast<long long>(r->ttl_ms));
  } else if (r->held) {
    std::printf("held %lld\n", static_cast<long long>(r->ttl_ms));
  } else {
    std::printf("free\n");
  }
  return kExitOk;
}

int cmd_run(const Options& o, Lock& lock) {
  const int rc = acquire(o, lock);
  return rc != kExitOk ? rc : run_child(o, lock);
}

int dispatch(const Options& o) {
  if (o.url_count > 1) {
    error_line("quorum locks (%d --url options) are not supported yet by this build; give one --url",
               o.url_count);
    return kExitUsage;
  }
  edgelock::Connection conn;
  int rc = open_connection(o, o.urls[0], &conn);
  if (rc != kExitOk) return rc;
  Lock lock(conn);
  edgelock::LockOptions lo;
  lo.ttl_ms = o.ttl_ms;
  if (std::strlen(o.key) > edgelock::kMaxKeyLen) {
    error_line("KEY is longer than %zu bytes", edgelock::kMaxKeyLen);
    return kExitUsage;
  }
  const Status s = lock.init(Bytes::from_cstr(o.key), lo);
  if (!s.ok()) {
    error_line("cannot set up the lock: %s", s.to_string());
    return exit_code_for(s.code());
  }
  switch (o.command) {
    case Subcommand::kRun: return cmd_run(o, lock);
    case Subcommand::kAcquire: return cmd_acquire(o, lock);
    case Subcommand::kRelease: return cmd_release(o, lock);
    case Subcommand::kExtend: return cmd_extend(o, lock);
    case Subcommand::kStatus: return cmd_status(o, lock);
    case Subcommand::kNone: break;
  }
  return kExitUsage;
}

}  // namespace
}  // namespace cli

int main(int argc, char** argv) {
  cli::Options options;
  const int rc = cli::parse_args(argc, argv, &options);
  if (rc >= 0) return rc;
  const int out = cli::dispatch(options);
  std::fflush(stdout);
  return out;
}
