#pragma once
/// @file endpoint.h
/// Where a Redis server is, parsed from a URL into fixed storage.

#include <cstdint>

#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {

enum class Scheme : uint8_t { kTcp, kTls, kUnix };

/// A parsed endpoint. Strings are NUL-terminated and fixed-size. A unix
/// socket has a path and no host, a TCP/TLS server the reverse: the two
/// share storage, so read the one the scheme says.
struct Endpoint {
  Scheme scheme = Scheme::kTcp;
  bool has_password = false;
  uint16_t port = 6379;
  int db = 0;
  union {
    char host[kMaxHostLen + 1] = {};  ///< kTcp, kTls: host name or IP literal, no brackets.
    char path[kMaxPathLen + 1];       ///< kUnix: socket path.
  };
  char user[kMaxUserLen + 1] = {};  ///< ACL user; empty = "default".
  char password[kMaxPasswordLen + 1] = {};
};
static_assert(kMaxPathLen <= kMaxHostLen, "a socket path shares the host's storage");

/// One address a host resolved to (network byte order). Plain data, so
/// public headers need no socket headers.
struct HostAddress {
  uint8_t family = 0;      ///< 4 (IPv4), 6 (IPv6); 0 = none.
  uint8_t bytes[16] = {};  ///< 4 or 16 bytes of address.
  uint32_t scope_id = 0;   ///< IPv6 link-local interface index.
};

/// The addresses of an endpoint's host, in the order connects try them
/// (IPv4 first, as hiredis does). Fixed size: at most kMaxHostAddresses.
struct ResolvedHost {
  HostAddress addrs[kMaxHostAddresses];
  uint8_t count = 0;
  /// The last lookup's failure (getaddrinfo's EAI_* code), 0 if it worked.
  int lookup_error = 0;
};

/// Parses `redis://[[user]:password@]host[:port][/db]`,
/// `rediss://…` (same form, TLS) and `unix:///path[?db=N]`. Hosts may be
/// names, IPv4 or bracketed IPv6 literals. Percent-escapes (%XX) are decoded
/// in user and password. On error `why` (if given) names the problem.
/// Errors: kInvalidArgument (malformed URL, bad port or db, unknown scheme),
/// kBufferTooSmall (a part exceeds its fixed capacity).
Status parse_url(const char* url, Endpoint* out, const char** why = nullptr);

/// Formats "host:port", "[v6]:port" or the socket path into `buf`.
/// Returns the number of characters written (truncates only the display).
int format_endpoint(const Endpoint& ep, char* buf, int size);

}  // namespace edgelock
