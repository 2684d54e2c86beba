#include <cstdio>
#include <cstring>

#include "edgelock/endpoint.h"

namespace edgelock {

namespace {

struct Span {
  const char* p;
  size_t n;
};

Status fail(const char** why, const char* text, ErrorCode code = ErrorCode::kInvalidArgument) {
  if (why) *why = text;
  return code;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Copies `s` into `dst[cap+1]`, decoding %XX when `decode` is set.
Status copy_part(Span s, char* dst, size_t cap, bool decode, const char** why, const char* what) {
  size_t o = 0;
  for (size_t i = 0; i < s.n; ++i) {
    char c = s.p[i];
    if (decode && c == '%') {
      if (i + 2 >= s.n) return fail(why, "truncated %-escape");
      const int hi = hex_value(s.p[i + 1]), lo = hex_value(s.p[i + 2]);
      if (hi < 0 || lo < 0) return fail(why, "bad %-escape");
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0') return fail(why, "NUL byte in URL part");
    if (o >= cap) return fail(why, what, ErrorCode::kBufferTooSmall);
    dst[o++] = c;
  }
  dst[o] = '\0';
  return Status();
}

// An unsigned decimal in [lo, hi], the whole span digits, into `*out`;
// else `what` is why it was refused.
template <typename T>
Status number_field(Span s, long lo, long hi, T* out, const char** why, const char* what) {
  if (s.n == 0 || s.n > 9) return fail(why, what);
  long v = 0;
  for (size_t i = 0; i < s.n; ++i) {
    if (s.p[i] < '0' || s.p[i] > '9') return fail(why, what);
    v = v * 10 + (s.p[i] - '0');
  }
  if (v < lo || v > hi) return fail(why, what);
  *out = static_cast<T>(v);
  return Status();
}

Status parse_db(Span s, Endpoint* ep, const char** why) {
  return number_field(s, 0, 1000000, &ep->db, why, "bad database number");
}

Status parse_userinfo(Span s, Endpoint* ep, const char** why) {
  const char* colon = static_cast<const char*>(std::memchr(s.p, ':', s.n));
  if (!colon) return fail(why, "credentials need ':' before the password");
  const Span user{s.p, static_cast<size_t>(colon - s.p)};
  const Span pass{colon + 1, s.n - user.n - 1};
  EDGELOCK_TRY(copy_part(user, ep->user, kMaxUserLen, true, why, "user name too long"));
  EDGELOCK_TRY(copy_part(pass, ep->password, kMaxPasswordLen, true, why, "password too long"));
  ep->has_password = true;
  return Status();
}

Status parse_hostport(Span s, Endpoint* ep, const char** why) {
  Span host = s, port{nullptr, 0};
  if (s.n && s.p[0] == '[') {
    const char* close = static_cast<const char*>(std::memchr(s.p, ']', s.n));
    if (!close) return fail(why, "unterminated IPv6 literal");
    host = Span{s.p + 1, static_cast<size_t>(close - s.p - 1)};
    const size_t rest = s.n - (close - s.p) - 1;
    if (rest) {
      if (close[1] != ':') return fail(why, "junk after IPv6 literal");
      port = Span{close + 2, rest - 1};
    }
    if (!std::memchr(host.p, ':', host.n)) return fail(why, "bracketed host is not IPv6");
  } else {
    const char* colon = static_cast<const char*>(std::memchr(s.p, ':', s.n));
    if (colon) {
      host = Span{s.p, static_cast<size_t>(colon - s.p)};
      port = Span{colon + 1, s.n - host.n - 1};
      if (std::memchr(port.p, ':', port.n)) return fail(why, "IPv6 host needs brackets");
    }
  }
  if (host.n == 0) return fail(why, "missing host");
  // A space or control byte is a typo (a stray blank before ':port'), never
  // part of a host name or address: refused here, not sent to the resolver.
  for (size_t i = 0; i < host.n; ++i) {
    const unsigned char c = static_cast<unsigned char>(host.p[i]);
    if (c <= 0x20 || c == 0x7f) return fail(why, "space or control character in host");
  }
  EDGELOCK_TRY(copy_part(host, ep->host, kMaxHostLen, false, why, "host name too long"));
  if (!port.p) return Status();
  return number_field(port, 1, 65535, &ep->port, why, "bad port");
}

Status parse_network(Span rest, Endpoint* ep, const char** why) {
  // authority ends at the first '/' (db) ; '?' is not used for TCP URLs.
  const char* slash = static_cast<const char*>(std::memchr(rest.p, '/', rest.n));
  Span auth{rest.p, slash ? static_cast<size_t>(slash - rest.p) : rest.n};
  if (std::memchr(auth.p, '?', auth.n)) return fail(why, "query not supported here");
  // The password may contain '@'; the host part cannot, so split at the last.
  const char* at = nullptr;
  for (size_t i = auth.n; i > 0; --i) {
    if (auth.p[i - 1] == '@') {
      at = auth.p + i - 1;
      break;
    }
  }
  if (at) {
    EDGELOCK_TRY(parse_userinfo(Span{auth.p, static_cast<size_t>(at - auth.p)}, ep, why));
    auth = Span{at + 1, auth.n - static_cast<size_t>(at - auth.p) - 1};
  }
  EDGELOCK_TRY(parse_hostport(auth, ep, why));
  if (slash) {
    const Span db{slash + 1, rest.n - static_cast<size_t>(slash - rest.p) - 1};
    if (db.n) EDGELOCK_TRY(parse_db(db, ep, why));
  }
  return Status();
}

Status parse_unix(Span rest, Endpoint* ep, const char** why) {
  if (rest.n == 0 || rest.p[0] != '/') return fail(why, "unix socket path must be absolute");
  const char* q = static_cast<const char*>(std::memchr(rest.p, '?', rest.n));
  const Span path{rest.p, q ? static_cast<size_t>(q - rest.p) : rest.n};
  EDGELOCK_TRY(copy_part(path, ep->path, kMaxPathLen, true, why, "socket path too long"));
  if (q) {
    const Span query{q + 1, rest.n - path.n - 1};
    if (query.n < 3 || std::memcmp(query.p, "db=", 3) != 0) {
      return fail(why, "only ?db=N is supported");
    }
    EDGELOCK_TRY(parse_db(Span{query.p + 3, query.n - 3}, ep, why));
  }
  return Status();
}

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

Status parse_url(const char* url, Endpoint* out, const char** why) {
  if (!url || !out) return fail(why, "null argument");
  Endpoint ep;
  const size_t len = std::strlen(url);
  Status s;
  if (starts_with(url, "redis://")) {
    ep.scheme = Scheme::kTcp;
    s = parse_network(Span{url + 8, len - 8}, &ep, why);
  } else if (starts_with(url, "rediss://")) {
    ep.scheme = Scheme::kTls;
    s = parse_network(Span{url + 9, len - 9}, &ep, why);
  } else if (starts_with(url, "unix://")) {
    ep.scheme = Scheme::kUnix;
    s = parse_unix(Span{url + 7, len - 7}, &ep, why);
  } else {
    return fail(why, "unknown scheme (want redis://, rediss:// or unix://)");
  }
  if (s.ok()) *out = ep;
  return s;
}

int format_endpoint(const Endpoint& ep, char* buf, int size) {
  int n = 0;
  if (ep.scheme == Scheme::kUnix) {
    n = std::snprintf(buf, static_cast<size_t>(size), "%s", ep.path);
  } else if (std::strchr(ep.host, ':')) {
    n = std::snprintf(buf, static_cast<size_t>(size), "[%s]:%u", ep.host, ep.port);
  } else {
    n = std::snprintf(buf, static_cast<size_t>(size), "%s:%u", ep.host, ep.port);
  }
  return n < 0 ? 0 : (n >= size ? size - 1 : n);
}

}  // namespace edgelock
