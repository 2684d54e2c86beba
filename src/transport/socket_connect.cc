// Name lookup (only when asked: Connection::resolve(), or the connect of a
// name never looked up), then hiredis starts a non-blocking connect to the
// numeric addresses found then (no lookup on reconnect), one after the
// other, each step a poll() that never waits; the socket is made
// close-on-exec as soon as hiredis returns it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error_text.h"
#include "transport/library_info.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

namespace {

// An IPv4 or IPv6 literal, without I/O. A scoped IPv6 one ("fe80::1%eth0";
// no host name has a '%') goes to getaddrinfo with AI_NUMERICHOST, which
// never asks a resolver.
bool literal(const char* host, HostAddress* out) {
  if (inet_pton(AF_INET, host, out->bytes) == 1) {
    out->family = 4;
    return true;
  }
  if (inet_pton(AF_INET6, host, out->bytes) == 1) {
    out->family = 6;
    return true;
  }
  if (!std::strchr(host, '%')) return false;
  addrinfo hints{};
  hints.ai_family = AF_INET6;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* list = nullptr;
  if (getaddrinfo(host, nullptr, &hints, &list) != 0 || !list) {
    if (list) freeaddrinfo(list);
    return false;
  }
  const sockaddr_in6* in6 = reinterpret_cast<const sockaddr_in6*>(list->ai_addr);
  out->family = 6;
  std::memcpy(out->bytes, &in6->sin6_addr, 16);
  out->scope_id = in6->sin6_scope_id;
  freeaddrinfo(list);
  return true;
}

void add(ResolvedHost* out, const addrinfo* ai) {
  if (out->count >= kMaxHostAddresses) return;
  HostAddress& a = out->addrs[out->count];
  if (ai->ai_family == AF_INET) {
    const sockaddr_in* in = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
    a.family = 4;
    std::memcpy(a.bytes, &in->sin_addr, 4);
  } else if (ai->ai_family == AF_INET6) {
    const sockaddr_in6* in6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
    a.family = 6;
    std::memcpy(a.bytes, &in6->sin6_addr, 16);
    a.scope_id = in6->sin6_scope_id;
  } else {
    return;
  }
  for (uint8_t i = 0; i < out->count; ++i) {
    const HostAddress& b = out->addrs[i];
    if (b.family == a.family && b.scope_id == a.scope_id &&
        std::memcmp(b.bytes, a.bytes, sizeof a.bytes) == 0) {
      return;  // the same address twice (one entry per protocol)
    }
  }
  ++out->count;
}

// The address as text hiredis can connect to without a name lookup
// ("192.0.2.1", "fe80::1%3"); false if it does not fit.
bool numeric_host(const HostAddress& a, char* out, size_t cap) {
  if (!inet_ntop(a.family == 4 ? AF_INET : AF_INET6, a.bytes, out, static_cast<socklen_t>(cap))) {
    return false;
  }
  if (a.family != 6 || a.scope_id == 0) return true;
  const size_t n = std::strlen(out);
  const int m = std::snprintf(out + n, cap - n, "%%%u", static_cast<unsigned>(a.scope_id));
  return m > 0 && static_cast<size_t>(m) < cap - n;
}

// Starts one non-blocking connect through hiredis (the design's socket
// layer), to a numeric address so hiredis's own getaddrinfo never queries
// DNS. Returns the fd, connected or still connecting (hiredis's context
// freed, the socket kept), or -1 with the reason in err.
int connect_one(const Endpoint& ep, const HostAddress* a, const char* where, ErrorText& err) {
  redisContext* c = nullptr;
  if (ep.scheme == Scheme::kUnix) {
    c = redisConnectUnixNonBlock(ep.path);
  } else {
    char host[INET6_ADDRSTRLEN + 16];
    if (!numeric_host(*a, host, sizeof host)) {
      set_error(err, "cannot connect to %s: address does not fit", where);
      return -1;
    }
    c = redisConnectNonBlock(host, ep.port);
  }
  if (!c || c->err) {
    set_error(err, "cannot connect to %s: %s", where, c ? c->errstr : "out of memory");
    if (c) redisFree(c);
    return -1;
  }
  const int fd = c->fd;
  // At once, on every connect: the command a tool runs must never inherit
  // the socket. (hiredis has no option to create it close-on-exec; a
  // fork+exec by another thread in these few instructions is the one gap.)
  (void)fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
  if (ep.scheme != Scheme::kUnix) {
    // hiredis sets TCP_NODELAY on some versions' non-blocking path only.
    const int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    redisEnableKeepAlive(c);
  }
  redisFreeKeepFd(c);  // public API since hiredis 0.13: the fd is ours now
  return fd;
}

}  // namespace

bool transport_resolve_numeric(const Endpoint& ep, ResolvedHost* out) {
  if (ep.scheme == Scheme::kUnix || ep.host[0] == '\0') {
    *out = ResolvedHost();
    return true;
  }
  HostAddress a;
  if (!literal(ep.host, &a)) return false;
  *out = ResolvedHost();
  out->addrs[0] = a;
  out->count = 1;
  return true;
}

Status transport_resolve(const Endpoint& ep, ResolvedHost* out, bool* looked_up, ErrorText& err) {
  *looked_up = false;
  if (transport_resolve_numeric(ep, out)) return Status();
  *looked_up = true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(ep.host, nullptr, &hints, &list);
  if (rc != 0 || !list) {
    if (list) freeaddrinfo(list);
    out->lookup_error = rc != 0 ? rc : EAI_NONAME;
    set_error(err, "cannot resolve %s: %s", ep.host, gai_strerror(out->lookup_error));
    return ErrorCode::kConnectFailed;
  }
  ResolvedHost r;
  for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) add(&r, ai);
  }
  for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET6) add(&r, ai);
  }
  freeaddrinfo(list);
  if (r.count == 0) {
    out->lookup_error = EAI_ADDRFAMILY;
    set_error(err, "cannot resolve %s: no IPv4 or IPv6 address", ep.host);
    return ErrorCode::kConnectFailed;
  }
  *out = r;
  return Status();
}

Status socket_start_connect(TransportState& t, ErrorText& err) {
  const Endpoint& ep = *t.ep;
  char where[kMaxHostLen + 16];
  format_endpoint(ep, where, sizeof where);
  const size_t n = ep.scheme == Scheme::kUnix ? 1 : t.addrs->count;
  if (n == 0) {
    // No address (the lookup failed, or no host): the open never calls the
    // resolver (it has no timeout of ours); Connection::resolve() does.
    set_error(err, "cannot connect to %s: host name not resolved (%s)", where,
              t.addrs->lookup_error ? gai_strerror(t.addrs->lookup_error) : "no address");
    return ErrorCode::kConnectFailed;
  }
  // An address refused at once (a unix socket, an unreachable network)
  // leaves its text in err and the next one is tried.
  while (t.next_addr < n) {
    const HostAddress* a = ep.scheme == Scheme::kUnix ? nullptr : &t.addrs->addrs[t.next_addr];
    ++t.next_addr;
    t.fd = connect_one(ep, a, where, err);
    if (t.fd >= 0) {
      t.want_events = POLLOUT;
      return Status();
    }
  }
  return ErrorCode::kConnectFailed;
}

Result<bool> socket_connect_step(TransportState& t, Clock& clock, ErrorText& err) {
  char where[kMaxHostLen + 16];
  format_endpoint(*t.ep, where, sizeof where);
  pollfd p{t.fd, POLLOUT, 0};
  const int rc = poll(&p, 1, 0);
  if (rc < 0 && errno != EINTR) {
    set_error(err, "cannot connect to %s: poll: %s", where, std::strerror(errno));
    return ErrorCode::kIo;
  }
  if (rc <= 0) {
    if (!t.deadline.expired(clock)) return false;
    set_error(err, "cannot connect to %s: timed out", where);
    return ErrorCode::kTimeout;
  }
  int so_error = 0;
  socklen_t len = sizeof so_error;
  if (getsockopt(t.fd, SOL_SOCKET, SO_ERROR, &so_error, &len) < 0) so_error = errno;
  if (so_error == 0) {
    t.want_events = 0;
    return true;
  }
  set_error(err, "cannot connect to %s: %s", where, std::strerror(so_error));
  ::close(t.fd);
  t.fd = -1;
  if (t.deadline.expired(clock)) return ErrorCode::kConnectFailed;
  EDGELOCK_TRY(socket_start_connect(t, err));
  return false;
}

void library_info(LibraryInfo* out) {
  *out = LibraryInfo();
  out->hiredis_major = HIREDIS_MAJOR;
  out->hiredis_minor = HIREDIS_MINOR;
  out->hiredis_patch = HIREDIS_PATCH;
#if HIREDIS_MAJOR >= 1
  // hiredis has no run-time version call. redisConnectWithOptions() is a
  // 1.x function: a build with 1.x headers that picked up a 0.14 library
  // fails to link here instead of running with mismatched structures.
  redisContext* (*volatile probe)(const redisOptions*) = &redisConnectWithOptions;
  (void)probe;
#endif
  tls_library_info(out);
}

}  // namespace detail
}  // namespace edgelock
