#pragma once
// Multi-host URLs (private): "redis-cluster://[user:pass@]h1:p1,h2:p2" and
// "redis-sentinel://[user:pass@]h1:p1,h2:p2/NAME[?db=N]". Each host is
// parsed by parse_url(), so hosts, ports and escapes follow its rules.

#include <cstddef>

#include "edgelock/endpoint.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// Called once per host, in URL order; an error stops the parse.
using HostFn = Status (*)(void* ctx, const Endpoint& host);

struct HostList {
  size_t count = 0;       ///< Hosts parsed.
  Endpoint creds;         ///< user/password (host unset); parsed before any host.
  const char* path = "";  ///< What follows the first '/'.
};

/// Parses `url` after `scheme` (e.g. "redis-cluster://"), handing each host
/// (without credentials) to `fn`. On error `why` names the problem.
/// Errors: kInvalidArgument (wrong scheme, empty or malformed host list),
/// kBufferTooSmall (a part exceeds its capacity), or `fn`'s.
Status parse_host_list(const char* url, const char* scheme, HostFn fn, void* ctx, HostList* out,
                       const char** why);

}  // namespace detail
}  // namespace edgelock
