// edgelock with several --url: a quorum (Redlock) lock over independent
// servers (redis://, rediss:// or unix:// URLs).
#include <cstdio>
#include <cstring>

#include "edgelock/quorum_lock.h"
#include "lock_commands.h"
#include "quorum.h"

namespace cli {

using edgelock::Bytes;
using edgelock::Connection;
using edgelock::ErrorCode;
using edgelock::Status;

int report_lock_error(const edgelock::QuorumLock& lock, Status s, const char* doing) {
  const char* text = error_text(lock);
  return fail_with(s.code(), "%s failed on %zu servers (quorum %zu): %s%s%s", doing, lock.size(),
                   lock.quorum(), cause_text(s), text[0] ? ": " : "", text);
}

namespace {

struct Servers {
  Connection conns[kMaxUrls];
  Connection* ptrs[kMaxUrls] = {};
  size_t n = 0;
  size_t quorum() const { return n / 2 + 1; }
};

// One line for a server that did not answer while a majority did: the
// command goes on (and may succeed), so it is a notice, not a failure.
void minority_line(const Connection& conn, const char* doing, size_t ok, size_t n) {
  char where[300];
  where_of(conn, where, sizeof where);
  const char* text = conn.last_error();
  notice_line("%s did not answer the %s (%s); going on with the %zu of %zu servers that did", where,
              doing, text[0] ? text : "no reply", ok, n);
}

// Servers that could not be connected, reported once the count is known:
// notices if a majority is up (the command goes on), errors otherwise.
void report_connects(const Servers& sv, const bool* connected, size_t up) {
  for (size_t i = 0; i < sv.n; ++i) {
    if (connected[i]) continue;
    if (up >= sv.quorum()) {
      minority_line(sv.conns[i], "connect", up, sv.n);
      continue;
    }
    char where[300];
    where_of(sv.conns[i], where, sizeof where);
    const char* text = sv.conns[i].last_error();
    if (std::strncmp(text, "cannot connect", 14) == 0) {
      error_line("%s", text);
    } else {
      error_line("connect to %s failed: %s", where, text[0] ? text : "no reply");
    }
  }
}

// Sets up every server and connects to each once: fewer than a majority
// reachable is a connection error (exit 3), as for one server.
int open_servers(const Options& o, Servers* sv) {
  sv->n = static_cast<size_t>(o.url_count);
  bool connected[kMaxUrls] = {};
  size_t up = 0;
  const int files = check_tls_files(o);
  if (files != kExitOk) return files;
  for (size_t i = 0; i < sv->n; ++i) {
    sv->ptrs[i] = &sv->conns[i];
    const int rc = init_server(o, o.urls[i], &sv->conns[i]);
    if (rc != kExitOk) return rc;
  }
  for (size_t i = 0; i < sv->n; ++i) {
    connected[i] = connect_server(&sv->conns[i], false) == kExitOk;
    up += connected[i];
  }
  report_connects(*sv, connected, up);
  if (up < sv->quorum()) {
    return fail("connect", kExitServer, "only %zu of %zu servers reachable; a quorum needs %zu", up,
                sv->n, sv->quorum());
  }
  return kExitOk;
}

// Counts per-server outcomes of release/extend by token (single-server
// owner-checked scripts): done on a majority = success, as
// QuorumLock::release() (the others free the key when its TTL ends), so a
// server that did not confirm is a notice then, and an error only when the
// whole operation fails.
int by_token(const Options& o, Servers& sv, bool extend) {
  const char* what = extend ? "extend" : "release";
  size_t done = 0, not_owner = 0;
  Status failed[kMaxUrls];
  for (size_t i = 0; i < sv.n; ++i) {
    edgelock::Lock lock(sv.conns[i]);
    edgelock::LockOptions lo;
    lo.ttl = from_ms(o.ttl_ms);
    if (!lock.init(Bytes::from_cstr(o.key), lo).ok() ||
        !lock.adopt(Bytes::from_cstr(o.token)).ok()) {
      return fail("usage", kExitUsage, "KEY or TOKEN too long or empty");
    }
    const Status s = extend ? lock.renew() : lock.release();
    done += s.ok();
    not_owner += s.code() == ErrorCode::kNotOwner;
    if (s.code() != ErrorCode::kNotOwner) failed[i] = s;
  }
  if (done >= sv.quorum()) {
    if (done < sv.n) {
      notice_line("%s of %s confirmed by %zu of %zu servers (quorum %zu)%s", what, o.key, done,
                  sv.n, sv.quorum(), extend ? "" : "; the others free it when its TTL ends");
    }
    if (o.json) {
      JsonObject j;
      j.str("key", o.key).str("token", o.token);
      if (extend) j.num("ttl_ms", o.ttl_ms);
      j.flag("held", extend).end(kExitOk);
    }
    return kExitOk;
  }
  if (not_owner > sv.n - sv.quorum()) {
    return fail("not_owner", kExitNotOwner, "not the owner of %s on a majority: the token is stale",
                o.key);
  }
  for (size_t i = 0; i < sv.n; ++i) {
    if (!failed[i].ok()) report_error(sv.conns[i], sv.conns[i].last_error(), failed[i], what);
  }
  return fail("no_quorum", kExitServer,
              "%s of %s confirmed by only %zu of %zu servers (quorum %zu)", what, o.key, done, sv.n,
              sv.quorum());
}

// status on every server: how many answered and hold the key, the
// shortest TTL among the holders; per-server outcomes in st[].
int status_round(const Options& o, Servers& sv, Status* st, size_t* answered, size_t* held,
                 int64_t* ttl) {
  for (size_t i = 0; i < sv.n; ++i) {
    edgelock::Lock lock(sv.conns[i]);
    if (!lock.init(Bytes::from_cstr(o.key)).ok()) {
      return fail("usage", kExitUsage, "KEY must be 1..%zu bytes", edgelock::kMaxKeyLen);
    }
    const edgelock::Result<edgelock::KeyStatus> r = lock.status();
    st[i] = r.status();
    if (!r.ok()) continue;
    ++*answered;
    if (r->held) {
      ++*held;
      const int64_t ms = r->expires ? r->ttl.count() : -1;  // -1: no expiry
      if (*ttl < 0 || ms < *ttl) *ttl = ms;
    }
  }
  return kExitOk;
}

// Held if a majority holds the key; ttl_ms is the shortest TTL among them.
// Servers that do not answer are reported after the count: errors if too
// few answered (exit 3), notices otherwise.
int quorum_status(const Options& o, Servers& sv) {
  size_t answered = 0, held = 0;
  int64_t ttl = -1;
  Status st[kMaxUrls];
  const int rc = status_round(o, sv, st, &answered, &held, &ttl);
  if (rc != kExitOk) return rc;
  for (size_t i = 0; i < sv.n; ++i) {
    if (st[i].ok()) continue;
    if (answered >= sv.quorum()) {
      minority_line(sv.conns[i], "status", answered, sv.n);
    } else {
      report_error(sv.conns[i], sv.conns[i].last_error(), st[i], "status");
    }
  }
  if (answered < sv.quorum()) {
    return fail("no_quorum", kExitServer,
                "status of %s: only %zu of %zu servers answered; a quorum needs %zu", o.key,
                answered, sv.n, sv.quorum());
  }
  const bool is_held = held >= sv.quorum();
  if (o.json) {
    JsonObject()
        .str("key", o.key)
        .flag("held", is_held)
        .num("ttl_ms", is_held ? ttl : 0)
        .end(kExitOk);
  } else if (is_held) {
    std::printf("held %lld\n", static_cast<long long>(ttl));
  } else {
    std::printf("free\n");
  }
  return kExitOk;
}

int quorum_command(const Options& o, Servers& sv, edgelock::QuorumLock& lock) {
  if (o.command == Subcommand::kRelease || o.command == Subcommand::kExtend) {
    return by_token(o, sv, o.command == Subcommand::kExtend);
  }
  if (o.command == Subcommand::kStatus) return quorum_status(o, sv);
  edgelock::QuorumOptions qo;
  qo.ttl = from_ms(o.ttl_ms);
  const Status s = lock.init(sv.ptrs, sv.n, Bytes::from_cstr(o.key), qo);
  if (!s.ok()) return fail_with(s.code(), "cannot set up the quorum lock: %s", cause_text(s));
  // No per-server events from a QuorumLock: the wait watches each slice.
  if (o.command == Subcommand::kRun) return cmd_run(o, lock, sv.conns[0].clock(), nullptr);
  return cmd_acquire(o, lock, sv.conns[0].clock(), nullptr);
}

bool any_counted(const edgelock::Metrics& m) {
  uint32_t sum = m.attempts + m.grants + m.busy + m.not_owner + m.timeouts + m.lost_leases +
                 m.reconnects + m.errors;
  for (uint32_t b : m.latency) sum += b;
  return sum != 0;
}

// --stats: each server's connection that counted anything (the quorum
// lock's rounds are not counted: a line says so).
void print_quorum_stats(const Options& o, Servers& sv) {
  const bool locked = o.command == Subcommand::kAcquire || o.command == Subcommand::kRun;
  if (locked) {
    std::fprintf(stderr,
                 "edgelock: stats quorum lock: rounds not counted (each server connection counts "
                 "its reconnects)\n");
  }
  for (size_t i = 0; i < sv.n; ++i) {
    if (!any_counted(sv.conns[i].metrics())) continue;
    char what[320], where[300];
    where_of(sv.conns[i], where, sizeof where);
    std::snprintf(what, sizeof what, "connection %s", where);
    print_stats(what, sv.conns[i].metrics());
  }
}

}  // namespace

int dispatch_quorum(const Options& o) {
  for (int i = 0; i < o.url_count; ++i) {
    const Topology t = topology_of(o.urls[i]);
    if (t != Topology::kServer) {
      return fail(
          "usage", kExitUsage,
          "a quorum lock spans independent servers (redis://, rediss://, unix://); %s URLs take one"
          " --url each",
          scheme_name(t));
    }
  }
  if (o.wait_replicas != 0) {
    return fail("usage", kExitUsage,
                "--wait-replicas needs a redis-sentinel:// or redis-cluster:// URL");
  }
  Servers sv;
  int rc = open_servers(o, &sv);
  if (rc != kExitOk) return rc;
  edgelock::QuorumLock lock;
  rc = quorum_command(o, sv, lock);
  if (o.stats) print_quorum_stats(o, sv);
  return rc;
}

}  // namespace cli
