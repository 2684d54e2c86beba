// edgelock: errors, exit codes, connections and JSON output.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"

namespace cli {

using edgelock::ErrorCode;

namespace {

void vline(const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::fprintf(stderr, "edgelock: %s\n", buf);
}

// The URL with any password replaced by "***", for error messages.
void redact_url(const char* url, char* out, size_t size) {
  std::snprintf(out, size, "%s", url);
  char* scheme_end = std::strstr(out, "://");
  if (!scheme_end) return;
  char* auth = scheme_end + 3;
  char* slash = std::strchr(auth, '/');
  char* at = nullptr;
  for (char* p = auth; *p && p != slash; ++p) {
    if (*p == '@') at = p;
  }
  char* colon = at ? static_cast<char*>(std::memchr(auth, ':', static_cast<size_t>(at - auth))) : nullptr;
  if (!colon) return;
  char rest[512];
  std::snprintf(rest, sizeof rest, "%s", at);
  std::snprintf(colon + 1, size - static_cast<size_t>(colon + 1 - out), "***%s", rest);
}

// Renewals must finish well inside TTL/3, so the command budget follows
// the TTL (capped at the library's 2 s default).
edgelock::Nanos command_budget(int64_t ttl_ms) {
  int64_t ms = ttl_ms / 4;
  if (ms > 2000) ms = 2000;
  if (ms < 5) ms = 5;
  return from_ms(ms);
}

}  // namespace

void error_line(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(fmt, ap);
  va_end(ap);
}

void notice_line(const Options& o, const char* fmt, ...) {
  if (o.quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vline(fmt, ap);
  va_end(ap);
}

void report_error(const edgelock::Connection& conn, edgelock::Status s, const char* doing) {
  const char* text = conn.last_error();
  // Transport errors already name the server ("cannot connect to ...").
  if (std::strncmp(text, "cannot connect", 14) == 0) {
    error_line("%s", text);
    return;
  }
  char where[300];
  edgelock::format_endpoint(conn.endpoint(), where, sizeof where);
  if (text[0]) {
    error_line("%s failed at %s: %s: %s", doing, where, s.to_string(), text);
  } else {
    error_line("%s failed at %s: %s", doing, where, s.to_string());
  }
}

int exit_code_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return kExitOk;
    case ErrorCode::kBusy: return kExitBusy;
    // A caller's value out of range; a reply that does not fit the fixed
    // capacities (kBufferTooSmall) is the server's doing: the default, 3.
    case ErrorCode::kInvalidArgument: return kExitUsage;
    case ErrorCode::kNotOwner:
    case ErrorCode::kNotHeld: return kExitNotOwner;
    default: return kExitServer;
  }
}

void expired_line(const Options& o, const char* doing) {
  const long long ttl = static_cast<long long>(o.ttl_ms);
  if (std::strcmp(doing, "extend") == 0) {
    error_line("%s: extended too late: the new %lld ms TTL ran out before the reply arrived;"
               " %s may be free already", o.key, ttl, o.key);
  } else {
    error_line("%s: %s too late: the %lld ms lease ran out in transit (the reply took longer than"
               " --ttl allows); released", o.key, std::strcmp(doing, "permit") == 0 ? "permit granted" : "granted",
               ttl);
  }
}

void unknown_outcome_line(const Options& o, edgelock::Status s, const char* doing) {
  const ErrorCode c = s.code();
  if (c != ErrorCode::kTimeout && c != ErrorCode::kIo && c != ErrorCode::kConnectionClosed) return;
  if (std::strcmp(doing, "release") == 0) {
    notice_line(o, "%s: the release may or may not have happened (no reply); releasing again is safe", o.key);
  } else if (std::strcmp(doing, "extend") == 0) {
    notice_line(o, "%s: the extend may or may not have happened (no reply); count on the earlier expiry", o.key);
  }
}

int setup_connection(const Options& o, const char* url, edgelock::Connection* conn) {
  edgelock::Endpoint ep;
  const char* why = nullptr;
  if (!edgelock::parse_url(url, &ep, &why).ok()) {
    char shown[300];
    redact_url(url, shown, sizeof shown);
    error_line("bad URL '%s': %s", shown, why ? why : "invalid");
    return kExitUsage;
  }
  const char* env_password = std::getenv("EDGELOCK_PASSWORD");
  if (!ep.has_password && env_password && env_password[0]) {
    if (std::strlen(env_password) > edgelock::kMaxPasswordLen) {
      error_line("EDGELOCK_PASSWORD is longer than %zu bytes", edgelock::kMaxPasswordLen);
      return kExitUsage;
    }
    std::snprintf(ep.password, sizeof ep.password, "%s", env_password);
    ep.has_password = true;
  }
  edgelock::ConnectionOptions co;
  co.command_timeout = command_budget(o.ttl_ms);
  co.tls.ca_file = o.tls_ca;
  co.tls.cert_file = o.tls_cert;
  co.tls.key_file = o.tls_key;
  co.tls.server_name = o.tls_server_name;
  const edgelock::Status s = conn->setup(ep, co);
  if (!s.ok()) {
    report_error(*conn, s, "setup");
    return s.code() == ErrorCode::kInvalidArgument ? kExitUsage : kExitServer;
  }
  return kExitOk;
}

int connect_now(edgelock::Connection* conn, bool report) {
  const edgelock::Status s = conn->connect();
  if (!s.ok()) {
    if (report) report_error(*conn, s, "connect");
    return s.code() == ErrorCode::kInvalidArgument ? kExitUsage : kExitServer;
  }
  // COMMAND never inherits the Redis socket: the connection creates it
  // close-on-exec, on every connect.
  return kExitOk;
}

int open_connection(const Options& o, const char* url, edgelock::Connection* conn) {
  const int rc = setup_connection(o, url, conn);
  return rc != kExitOk ? rc : connect_now(conn, true);
}

void print_json_string(const char* s, size_t n) {
  std::putchar('"');
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      std::printf("\\%c", c);
    } else if (c < 0x20 || c == 0x7f) {
      std::printf("\\u%04x", c);
    } else {
      std::putchar(static_cast<int>(c));
    }
  }
  std::putchar('"');
}

}  // namespace cli
