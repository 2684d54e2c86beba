#include "backends/topology_url.h"

#include <cstdio>
#include <cstring>

namespace edgelock {
namespace detail {

namespace {

Status fail(const char** why, const char* text) {
  if (why) *why = text;
  return ErrorCode::kInvalidArgument;
}

// parse_url() on "redis://" + part: one rule set for hosts and credentials.
Status parse_part(const char* part, size_t n, Endpoint* out, const char** why) {
  char buf[16 + 3 * (kMaxUserLen + kMaxPasswordLen) + kMaxHostLen];
  if (n + 9 > sizeof buf) return fail(why, "URL part too long");
  std::memcpy(buf, "redis://", 8);
  std::memcpy(buf + 8, part, n);
  buf[8 + n] = '\0';
  return parse_url(buf, out, why);
}

}  // namespace

Status parse_host_list(const char* url, const char* scheme, HostFn fn, void* ctx, HostList* out,
                       const char** why) {
  const size_t slen = std::strlen(scheme);
  if (!url || std::strncmp(url, scheme, slen) != 0) return fail(why, "wrong scheme");
  const char* auth = url + slen;
  const char* slash = std::strchr(auth, '/');
  const char* end = slash ? slash : auth + std::strlen(auth);
  out->path = slash ? slash + 1 : "";
  // The password may contain '@'; host names cannot: split at the last one.
  const char* hosts = auth;
  for (const char* p = end; p > auth; --p) {
    if (p[-1] == '@') {
      hosts = p;
      break;
    }
  }
  out->creds = Endpoint();
  if (hosts != auth) {
    char cred[8 + 3 * (kMaxUserLen + kMaxPasswordLen)];
    const int n = std::snprintf(cred, sizeof cred, "%.*sx", static_cast<int>(hosts - auth), auth);
    if (n <= 0 || static_cast<size_t>(n) >= sizeof cred) return fail(why, "credentials too long");
    EDGELOCK_TRY(parse_part(cred, static_cast<size_t>(n), &out->creds, why));
  }
  out->count = 0;
  const char* p = hosts;
  while (p < end) {
    const char* comma = static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(end - p)));
    const char* stop = comma ? comma : end;
    if (stop == p || (comma && comma + 1 == end)) return fail(why, "empty host in list");
    Endpoint host;
    EDGELOCK_TRY(parse_part(p, static_cast<size_t>(stop - p), &host, why));
    const Status s = fn ? fn(ctx, host) : Status();
    if (!s.ok()) {
      if (why) *why = "host not accepted (too many hosts?)";
      return s;
    }
    ++out->count;
    p = comma ? comma + 1 : end;
  }
  if (out->count == 0) return fail(why, "no hosts");
  return Status();
}

}  // namespace detail
}  // namespace edgelock
