// edgelock: opening the back end a URL names (target.h).
#include "target.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "report.h"

namespace cli {

using edgelock::Bytes;
using edgelock::Deadline;
using edgelock::ErrorCode;
using edgelock::Status;

namespace {

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

// Renewals must finish well inside TTL/3, so the command budget follows
// the TTL (capped at the library's 2 s default).
edgelock::Nanos command_budget(int64_t ttl_ms) {
  int64_t ms = ttl_ms / 4;
  if (ms > 2000) ms = 2000;
  if (ms < 5) ms = 5;
  return from_ms(ms);
}

// True if the URL's authority (between "://" and the first '/') has
// credentials.
bool has_credentials(const char* url) {
  const char* auth = std::strstr(url, "://");
  if (!auth) return false;
  auth += 3;
  const char* slash = std::strchr(auth, '/');
  const char* at = std::strchr(auth, '@');
  return at && (!slash || at < slash);
}

// `url` with ":<password>@" after the scheme, the password percent-escaped
// (the URL parser decodes it).
std::string with_password(const char* url, const char* password) {
  const char* auth = std::strstr(url, "://") + 3;
  std::string out(url, static_cast<size_t>(auth - url));
  out += ':';
  for (const char* p = password; *p; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
        std::strchr("-._~", c)) {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out + "@" + auth;
}

// The URL a Sentinel or Cluster is set up with: the environment's password
// added when the URL has none. Exits 2 if it is too long.
int topology_url(const char* url, std::string* out) {
  const char* password = env_password();
  *out = (password && !has_credentials(url)) ? with_password(url, password) : std::string(url);
  if (password && std::strlen(password) > edgelock::kMaxPasswordLen) {
    return fail("usage", kExitUsage, "the password from the environment is longer than %zu bytes",
                edgelock::kMaxPasswordLen);
  }
  return kExitOk;
}

// True if a '/', '?' or '#' comes before the URL's last '@': the authority
// then ends early, and the usual cause is a password left unencoded.
bool unencoded_userinfo(const char* url) {
  const char* start = std::strstr(url, "://");
  start = start ? start + 3 : url;
  const char* at = std::strrchr(start, '@');
  return at && std::strcspn(start, "/?#") < static_cast<size_t>(at - start);
}

int bad_url(const char* url, const char* why) {
  char shown[300];
  redact_url(url, shown, sizeof shown);
  const char* hint = unencoded_userinfo(url)
                         ? " (percent-encode '/', '?', '#', '@' and ':' in a password, e.g. '/' as"
                           " %2F, or pass it in EDGELOCK_PASSWORD)"
                         : "";
  return fail("usage", kExitUsage, "bad URL '%s': %s%s", shown, why && why[0] ? why : "invalid",
              hint);
}

// Every scheme the tool takes; a URL with another is refused naming them.
bool known_scheme(const char* url) {
  for (const char* s :
       {"redis://", "rediss://", "unix://", "redis-sentinel://", "redis-cluster://"}) {
    if (starts_with(url, s)) return true;
  }
  return false;
}

}  // namespace

Topology topology_of(const char* url) {
  if (starts_with(url, "redis-sentinel://")) return Topology::kSentinel;
  if (starts_with(url, "redis-cluster://")) return Topology::kCluster;
  return Topology::kServer;
}

const char* scheme_name(Topology t) {
  switch (t) {
    case Topology::kSentinel: return "redis-sentinel://";
    case Topology::kCluster: return "redis-cluster://";
    default: return "redis://";
  }
}

const char* env_password() {
  for (const char* name : {"EDGELOCK_PASSWORD", "REDISCLI_AUTH"}) {
    const char* v = std::getenv(name);
    if (v && v[0]) return v;
  }
  return nullptr;
}

edgelock::ConnectionOptions connection_options(const Options& o) {
  edgelock::ConnectionOptions co;
  co.command_timeout = command_budget(o.ttl_ms);
  co.tls.ca_file = o.tls_ca;
  co.tls.cert_file = o.tls_cert;
  co.tls.key_file = o.tls_key;
  co.tls.server_name = o.tls_server_name;
  return co;
}

void where_of(const edgelock::Connection& conn, char* buf, int size) {
  edgelock::format_endpoint(conn.endpoint(), buf, size);
}

int report_error(const edgelock::Connection& conn, const char* text, Status s, const char* doing) {
  char where[300];
  where_of(conn, where, sizeof where);
  note_where(where);
  // The database number came from the caller's URL: a server with fewer
  // databases refuses SELECT, a caller error like any bad URL part.
  if (std::strstr(text, "DB index is out of range")) {
    return fail("usage", kExitUsage,
                "database %d does not exist at %s (the server has fewer; see its 'databases'"
                " setting): %s",
                conn.endpoint().db, where, text);
  }
  // Transport errors already name the server ("cannot connect to ...").
  if (std::strncmp(text, "cannot connect", 14) == 0) return fail_with(s.code(), "%s", text);
  if (text[0])
    return fail_with(s.code(), "%s failed at %s: %s: %s", doing, where, cause_text(s), text);
  return fail_with(s.code(), "%s failed at %s: %s", doing, where, cause_text(s));
}

int init_server(const Options& o, const char* url, edgelock::Connection* conn) {
  edgelock::Endpoint ep;
  const char* why = nullptr;
  if (!edgelock::parse_url(url, &ep, &why).ok()) return bad_url(url, why);
  const char* password = env_password();
  if (!ep.has_password && password) {
    if (std::strlen(password) > edgelock::kMaxPasswordLen) {
      return fail("usage", kExitUsage, "the password from the environment is longer than %zu bytes",
                  edgelock::kMaxPasswordLen);
    }
    std::snprintf(ep.password, sizeof ep.password, "%s", password);
    ep.has_password = true;
  }
  const Status s = conn->init(ep, connection_options(o));
  if (!s.ok()) return report_error(*conn, conn->last_error(), s, "setup");
  return kExitOk;
}

int connect_server(edgelock::Connection* conn, bool report) {
  const Status s = conn->connect();
  if (!s.ok()) {
    if (report) return report_error(*conn, conn->last_error(), s, "connect");
    return error_kind(s.code()).exit;
  }
  // COMMAND never inherits the Redis socket: the connection creates it
  // close-on-exec, on every connect.
  return kExitOk;
}

namespace {
Target* g_opened = nullptr;  // the tool opens one back end per run
}  // namespace

const edgelock::Connection& serving(Bytes key) {
  static const edgelock::Connection kNone{};
  return g_opened ? g_opened->backend().connection_for(key) : kNone;
}

int Target::open(const Options& o, const char* url) {
  g_opened = this;
  if (!known_scheme(url)) {
    return bad_url(url,
                   "unknown scheme (want redis://, rediss://, unix://, redis-sentinel:// or"
                   " redis-cluster://)");
  }
  const int files = check_tls_files(o);
  if (files != kExitOk) return files;
  topology_ = topology_of(url);
  switch (topology_) {
    case Topology::kSentinel: return open_sentinel(o, url);
    case Topology::kCluster: return open_cluster(o, url);
    default: break;
  }
  if (o.wait_replicas != 0) {
    return fail("usage", kExitUsage,
                "--wait-replicas needs a redis-sentinel:// or redis-cluster:// URL");
  }
  const int rc = init_server(o, url, &conn_);
  return rc != kExitOk ? rc : connect_server(&conn_, true);
}

int Target::open_sentinel(const Options& o, const char* url) {
  std::string full;
  int rc = topology_url(url, &full);
  if (rc != kExitOk) return rc;
  sentinel_.reset(new (std::nothrow) edgelock::Sentinel());
  if (!sentinel_) return fail("internal", kExitServer, "out of memory");
  const edgelock::ConnectionOptions co = connection_options(o);
  edgelock::SentinelOptions so;
  so.wait_replicas = static_cast<int>(o.wait_replicas);
  if (o.replica_timeout_ms > 0) so.wait_timeout = from_ms(o.replica_timeout_ms);
  so.sentinel_password = std::getenv("EDGELOCK_SENTINEL_PASSWORD");
  Status s = sentinel_->init(full.c_str(), co, so);
  if (!s.ok()) return bad_url(url, sentinel_->last_error());
  s = sentinel_->resolve(
      Deadline::after(sentinel_->clock(), co.connect_timeout + co.command_timeout));
  if (!s.ok()) {
    return fail_with(s.code(), "no primary found through the sentinels: %s: %s", cause_text(s),
                     sentinel_->last_error());
  }
  return kExitOk;
}

int Target::open_cluster(const Options& o, const char* url) {
  std::string full;
  int rc = topology_url(url, &full);
  if (rc != kExitOk) return rc;
  cluster_.reset(new (std::nothrow) edgelock::Cluster());
  if (!cluster_) return fail("internal", kExitServer, "out of memory");
  const edgelock::ConnectionOptions co = connection_options(o);
  edgelock::ClusterOptions cl;
  cl.wait_replicas = static_cast<int>(o.wait_replicas);
  if (o.replica_timeout_ms > 0) cl.wait_timeout = from_ms(o.replica_timeout_ms);
  Status s = cluster_->init(full.c_str(), co, cl);
  if (!s.ok()) return bad_url(url, cluster_->last_error());
  const Deadline d = Deadline::after(cluster_->clock(), co.connect_timeout + co.command_timeout);
  s = cluster_->refresh(d);
  if (s.ok()) s = cluster_->connect_primaries(d);
  if (!s.ok()) {
    return fail_with(s.code(), "cannot reach the cluster: %s: %s", cause_text(s),
                     cluster_->last_error());
  }
  return kExitOk;
}

edgelock::Backend& Target::backend() {
  if (sentinel_) return *sentinel_;
  if (cluster_) return *cluster_;
  return conn_;
}

void Target::print_stats(const char* key) {
  if (topology_ == Topology::kServer) {
    cli::print_stats("connection", conn_.metrics());
    return;
  }
  const edgelock::Bytes k = edgelock::Bytes::from_cstr(key);
  edgelock::Connection& serving = backend().connection_for(k);
  if (sentinel_) {
    const edgelock::SentinelStats& st = sentinel_->stats();
    std::fprintf(
        stderr,
        "edgelock: stats sentinel: resolves=%u primary_changes=%u readonly=%u wait_failures=%u\n",
        st.resolves, st.primary_changes, st.readonly, st.wait_failures);
  } else {
    const edgelock::ClusterStats& st = cluster_->stats();
    std::fprintf(
        stderr,
        "edgelock: stats cluster: refreshes=%u moved=%u ask=%u tryagain=%u wait_failures=%u\n",
        st.refreshes, st.moved, st.ask, st.tryagain, st.wait_failures);
  }
  char where[300], what[320];
  where_of(serving, where, sizeof where);
  std::snprintf(what, sizeof what, "connection %s", where);
  cli::print_stats(what, serving.metrics());
}

void print_stats(const char* what, const edgelock::Metrics& m) {
  char buf[320];
  const edgelock::Result<size_t> n = edgelock::format_metrics(m, buf, sizeof buf);
  std::fprintf(stderr, "edgelock: stats %s: %s\n", what, n.ok() ? buf : "(too long)");
}

// A --tls-* file that cannot be read is the caller's mistake (exit 2), found
// before any connect: the TLS layer would report it as a handshake failure.
int check_tls_files(const Options& o) {
  const struct {
    const char* flag;
    const char* path;
  } files[] = {{"--tls-ca", o.tls_ca}, {"--tls-cert", o.tls_cert}, {"--tls-key", o.tls_key}};
  for (const auto& f : files) {
    if (f.path && access(f.path, R_OK) != 0) {
      return fail("usage", kExitUsage, "%s %s: %s", f.flag, f.path, std::strerror(errno));
    }
  }
  return kExitOk;
}

}  // namespace cli
