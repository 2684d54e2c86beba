// edgelock: error lines, notices, exit codes and JSON output.
#include "report.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace cli {

using edgelock::ErrorCode;

namespace {

struct Outcome {
  bool json = false;
  bool quiet = false;
  const char* key = nullptr;
  bool failed = false;          // fail() was called
  bool object_printed = false;  // a JSON object went to stdout already
  const char* name = "";
  int exit = kExitOk;
  char message[512] = {};
  char where[300] = {};
  bool unknown_outcome = false;
  int busy_exit = kExitBusy;  // -E
  bool busy = false;          // the outcome is "busy"
};
Outcome g_out;

void vline(const char* fmt, va_list ap, char* copy, size_t copy_size) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::fprintf(stderr, "edgelock: %s\n", buf);
  if (copy) std::snprintf(copy, copy_size, "%s", buf);
}

// "Busy" (exit 1) is an expected answer, not an error: -q silences its
// line as it does notices. Every other failure is always printed.
int vfail(const char* name, int exit, const char* fmt, va_list ap) {
  if (g_out.quiet && exit == kExitBusy) {
    std::vsnprintf(g_out.message, sizeof g_out.message, fmt, ap);
  } else {
    vline(fmt, ap, g_out.message, sizeof g_out.message);
  }
  g_out.failed = true;
  g_out.name = name;
  g_out.exit = exit;
  if (exit == kExitBusy) {
    note_busy();
    g_out.exit = g_out.busy_exit;
  }
  return exit;
}

}  // namespace

ErrorKind error_kind(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return {"ok", kExitOk};
    case ErrorCode::kBusy: return {"busy", kExitBusy};
    case ErrorCode::kNotOwner:
    case ErrorCode::kNotHeld: return {"not_owner", kExitNotOwner};
    // A caller's value out of range. A reply that does not fit the fixed
    // capacities (kBufferTooSmall) is the server's doing: exit 3.
    case ErrorCode::kInvalidArgument: return {"usage", kExitUsage};
    case ErrorCode::kTimeout: return {"timeout", kExitServer};
    case ErrorCode::kIo:
    case ErrorCode::kConnectionClosed: return {"connection_lost", kExitServer};
    case ErrorCode::kConnectFailed:
    case ErrorCode::kNotConnected: return {"connect", kExitServer};
    case ErrorCode::kAuthFailed:
    case ErrorCode::kNoAuth: return {"auth", kExitServer};
    case ErrorCode::kTls:
    case ErrorCode::kTlsUnavailable:
    case ErrorCode::kTlsUntrusted:
    case ErrorCode::kTlsCertTime:
    case ErrorCode::kTlsHostMismatch: return {"tls", kExitServer};
    case ErrorCode::kProtocol: return {"protocol", kExitServer};
    case ErrorCode::kBufferTooSmall: return {"too_large", kExitServer};
    case ErrorCode::kNoQuorum: return {"no_quorum", kExitServer};
    case ErrorCode::kExpired: return {"too_late", kExitServer};
    case ErrorCode::kIndeterminate: return {"indeterminate", kExitServer};
    case ErrorCode::kRandomFailed: return {"internal", kExitServer};
    default: return {"server", kExitServer};  // READONLY, OOM, BUSY, LOADING, error replies
  }
}

const char* cause_text(edgelock::Status s) {
  // The answer came, but after the lease (or renewal) it gave had run out.
  if (s.code() == ErrorCode::kExpired) return "granted too late";
  return s.to_string();
}

void set_output(const Options& o) {
  g_out.json = o.json;
  g_out.quiet = o.quiet;
  g_out.key = o.key;
  g_out.busy_exit = o.conflict_exit >= 0 ? static_cast<int>(o.conflict_exit) : kExitBusy;
}

int busy_exit() { return g_out.busy_exit; }

void note_busy() { g_out.busy = true; }

int exit_status(int rc) { return g_out.busy && rc == kExitBusy ? g_out.busy_exit : rc; }

void error_line(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(fmt, ap, nullptr, 0);
  va_end(ap);
}

void notice_line(const char* fmt, ...) {
  if (g_out.quiet) return;
  va_list ap;
  va_start(ap, fmt);
  vline(fmt, ap, nullptr, 0);
  va_end(ap);
}

int fail(const char* name, int exit, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const int rc = vfail(name, exit, fmt, ap);
  va_end(ap);
  return rc;
}

int fail_with(ErrorCode code, const char* fmt, ...) {
  const ErrorKind k = error_kind(code);
  va_list ap;
  va_start(ap, fmt);
  const int rc = vfail(k.name, k.exit, fmt, ap);
  va_end(ap);
  return rc;
}

void note_where(const char* where) { std::snprintf(g_out.where, sizeof g_out.where, "%s", where); }

void note_unknown_outcome() { g_out.unknown_outcome = true; }

void finish_output() {
  if (!g_out.json || !g_out.failed || g_out.object_printed) return;
  JsonObject j;
  j.str("error", g_out.name).num("exit", g_out.exit);
  if (g_out.key) j.str("key", g_out.key);
  j.str("message", g_out.message);
  if (g_out.where[0]) j.str("where", g_out.where);
  if (g_out.unknown_outcome) j.str("outcome", "unknown");
  j.close();
}

JsonObject::JsonObject() { std::putchar('{'); }

void JsonObject::name(const char* n) {
  if (!first_) std::putchar(',');
  first_ = false;
  print_json_string(n, std::strlen(n));
  std::putchar(':');
}

JsonObject& JsonObject::str(const char* n, const char* s) { return str(n, s, std::strlen(s)); }

JsonObject& JsonObject::str(const char* n, const char* s, size_t len) {
  name(n);
  print_json_string(s, len);
  return *this;
}

JsonObject& JsonObject::num(const char* n, long long v) {
  name(n);
  std::printf("%lld", v);
  return *this;
}

JsonObject& JsonObject::flag(const char* n, bool v) {
  name(n);
  std::fputs(v ? "true" : "false", stdout);
  return *this;
}

void JsonObject::end(int exit, const char* error) {
  if (exit != kExitOk && error) str("error", error);
  num("exit", exit);
  close();
}

void JsonObject::close() {
  std::fputs("}\n", stdout);
  g_out.object_printed = true;
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

void redact_url(const char* url, char* out, size_t size) {
  // The whole user-info goes: everything between the scheme and the last
  // '@'. A generated password may hold unencoded '/', '@', '#' or ':', so
  // no split a parser would make (first '/', first ':') can be trusted to
  // find where the password ends; host names, ports and paths have no '@'.
  const char* scheme_end = std::strstr(url, "://");
  const char* start = scheme_end ? scheme_end + 3 : url;
  const char* at = std::strrchr(start, '@');
  if (!at) {
    std::snprintf(out, size, "%s", url);
    return;
  }
  std::snprintf(out, size, "%.*s***%s", static_cast<int>(start - url), url, at);
}

}  // namespace cli
