// edgelock: a Redis lock from the shell. See --help and docs/cli.md.
#include <cstdio>
#include <cstring>

#include "cli_commands.h"

namespace cli {

void report_lock_error(const edgelock::Lock& lock, edgelock::Status s, const char* doing) {
  report_error(lock.connection(), s, doing);
}

namespace {

using edgelock::Bytes;
using edgelock::ErrorCode;
using edgelock::Lock;
using edgelock::Status;

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
  const Status s = lock.renew();  // owner-checked: TTL := --ttl
  if (!s.ok()) return lock_error(o, lock, s, "extend");
  if (o.json && !o.quiet) print_json_lock(o, lock, false);
  return kExitOk;
}

int cmd_status(const Options& o, Lock& lock) {
  const edgelock::Result<edgelock::KeyStatus> r = lock.status();
  if (!r.ok()) return lock_error(o, lock, r.status(), "status");
  if (o.quiet) return kExitOk;
  const long long ttl_ms = r->expires ? to_ms(r->ttl) : -1;  // -1: held without expiry
  if (o.json) {
    std::printf("{\"key\":");
    print_json_string(o.key, std::strlen(o.key));
    std::printf(",\"held\":%s,\"ttl_ms\":%lld}\n", r->held ? "true" : "false", ttl_ms);
  } else if (r->held) {
    std::printf("held %lld\n", ttl_ms);
  } else {
    std::printf("free\n");
  }
  return kExitOk;
}

int run_lock_command(const Options& o, Lock& lock, edgelock::Connection& conn) {
  switch (o.command) {
    case Subcommand::kRun: return cmd_run(o, lock, conn.clock(), &conn);
    case Subcommand::kAcquire: return cmd_acquire(o, lock, conn.clock(), &conn);
    case Subcommand::kRelease: return cmd_release(o, lock);
    case Subcommand::kExtend: return cmd_extend(o, lock);
    case Subcommand::kStatus: return cmd_status(o, lock);
    default: break;
  }
  return kExitUsage;
}

int dispatch(const Options& o) {
  const bool primitive = o.command == Subcommand::kSemaphore || o.command == Subcommand::kCooldown;
  if (primitive && o.url_count > 1) {
    error_line("semaphore and cooldown take one --url (no quorum variant: see docs/primitives.md)");
    return kExitUsage;
  }
  if (o.url_count > 1) return dispatch_quorum(o);
  edgelock::Connection conn;
  int rc = open_connection(o, o.urls[0], &conn);
  if (rc != kExitOk) return rc;
  if (primitive) return dispatch_primitive(o, conn);
  Lock lock(conn);
  edgelock::LockOptions lo;
  lo.ttl = from_ms(o.ttl_ms);
  if (std::strlen(o.key) > edgelock::kMaxKeyLen) {
    error_line("KEY is longer than %zu bytes", edgelock::kMaxKeyLen);
    return kExitUsage;
  }
  const Status s = lock.init(Bytes::from_cstr(o.key), lo);
  if (!s.ok()) {
    error_line("cannot set up the lock: %s", s.to_string());
    return exit_code_for(s.code());
  }
  rc = run_lock_command(o, lock, conn);
  if (o.stats) {
    print_stats("connection", conn.metrics());
    print_stats("lock", lock.metrics());
  }
  return rc;
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
