// Name lookup (only when asked: setup or resolve) and our own socket
// connect: close-on-exec from creation (a fork+exec in another thread must
// never inherit it), to addresses looked up beforehand, within one deadline.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error_text.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

namespace {

// hiredis 0.14's keepalive (redisKeepAlive with REDIS_KEEPALIVE_INTERVAL).
constexpr int kKeepIdleSecs = 15;
constexpr int kKeepIntervalSecs = 5;
constexpr int kKeepCount = 3;
// Connect rounds guard against a peer that keeps the socket ready without
// progress; the deadline ends them first.
constexpr int kMaxWaitRounds = 1 << 16;

bool literal(const char* host, HostAddress* out) {
  if (inet_pton(AF_INET, host, out->bytes) == 1) {
    out->family = 4;
    return true;
  }
  if (inet_pton(AF_INET6, host, out->bytes) == 1) {
    out->family = 6;
    return true;
  }
  return false;
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

// A sockaddr for one address (or the unix path); 0 if it does not fit.
socklen_t make_sockaddr(const Endpoint& ep, const HostAddress* a, sockaddr_storage* ss) {
  std::memset(ss, 0, sizeof *ss);
  if (ep.scheme == Scheme::kUnix) {
    sockaddr_un* un = reinterpret_cast<sockaddr_un*>(ss);
    const size_t n = std::strlen(ep.path);
    if (n == 0 || n >= sizeof un->sun_path) return 0;
    un->sun_family = AF_UNIX;
    std::memcpy(un->sun_path, ep.path, n + 1);
    return static_cast<socklen_t>(sizeof(sockaddr_un));
  }
  if (a->family == 4) {
    sockaddr_in* in = reinterpret_cast<sockaddr_in*>(ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(ep.port);
    std::memcpy(&in->sin_addr, a->bytes, 4);
    return static_cast<socklen_t>(sizeof(sockaddr_in));
  }
  sockaddr_in6* in6 = reinterpret_cast<sockaddr_in6*>(ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(ep.port);
  std::memcpy(&in6->sin6_addr, a->bytes, 16);
  in6->sin6_scope_id = a->scope_id;
  return static_cast<socklen_t>(sizeof(sockaddr_in6));
}

// Waits for a non-blocking connect. Returns 0, an errno, or ETIMEDOUT.
int wait_connected(int fd, Deadline deadline, Clock& clock) {
  for (int i = 0; i < kMaxWaitRounds; ++i) {
    if (deadline.expired(clock)) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    const int rc = poll(&p, 1, deadline.poll_timeout_ms(clock));
    if (rc < 0 && errno != EINTR) return errno;
    if (rc <= 0) continue;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return errno;
    return err;
  }
  return ETIMEDOUT;
}

void tune_tcp(int fd) {
  // Best effort, as hiredis did: a socket without them still works.
  const int on = 1, idle = kKeepIdleSecs, intvl = kKeepIntervalSecs, cnt = kKeepCount;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

// One connect attempt. Returns the fd, or -1 with *error set (an errno;
// ETIMEDOUT when the deadline ended it).
int connect_one(const Endpoint& ep, const HostAddress* a, Deadline deadline, Clock& clock,
                int* error) {
  sockaddr_storage ss;
  const socklen_t len = make_sockaddr(ep, a, &ss);
  if (len == 0) {
    *error = ENAMETOOLONG;
    return -1;
  }
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = errno;
    return -1;
  }
  int rc = connect(fd, reinterpret_cast<const sockaddr*>(&ss), len);
  int err = rc == 0 ? 0 : errno;
  // A unix socket with a full backlog says EAGAIN: no poll() for that.
  for (int i = 0; err == EAGAIN && ep.scheme == Scheme::kUnix && i < 1000; ++i) {
    if (deadline.expired(clock)) break;
    clock.sleep_for(millis(1));
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&ss), len);
    err = rc == 0 ? 0 : errno;
  }
  if (err == EAGAIN) err = ETIMEDOUT;
  if (err == EINPROGRESS || err == EINTR) err = wait_connected(fd, deadline, clock);
  if (err != 0) {
    ::close(fd);
    *error = err;
    return -1;
  }
  if (ep.scheme != Scheme::kUnix) tune_tcp(fd);
  return fd;
}

}  // namespace

Status transport_resolve(const Endpoint& ep, ResolvedHost* out, bool* looked_up, ErrorText& err) {
  *looked_up = false;
  if (ep.scheme == Scheme::kUnix || ep.host[0] == '\0') {
    *out = ResolvedHost();
    return Status();
  }
  HostAddress a;
  if (literal(ep.host, &a)) {
    *out = ResolvedHost();
    out->addrs[0] = a;
    out->count = 1;
    return Status();
  }
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

int connect_socket(const Endpoint& ep, const ResolvedHost& addrs, Deadline deadline, Clock& clock,
                   ErrorText& err, ErrorCode* code) {
  char where[kMaxHostLen + 16];
  format_endpoint(ep, where, sizeof where);
  const size_t n = ep.scheme == Scheme::kUnix ? 1 : addrs.count;
  int error = 0;
  for (size_t i = 0; i < n; ++i) {
    if (deadline.expired(clock)) break;
    const int fd = connect_one(ep, ep.scheme == Scheme::kUnix ? nullptr : &addrs.addrs[i], deadline,
                               clock, &error);
    if (fd >= 0) return fd;
    if (error == ETIMEDOUT) break;
  }
  if (n == 0) {
    // Never looked up, or the lookup failed: connects never call the
    // resolver (it has no timeout); setup() or resolve() does.
    set_error(err, "cannot connect to %s: host name not resolved (%s)", where,
              addrs.lookup_error ? gai_strerror(addrs.lookup_error) : "no address");
    *code = ErrorCode::kConnectFailed;
  } else if (error == ETIMEDOUT || error == 0) {
    set_error(err, "cannot connect to %s: timed out", where);
    *code = ErrorCode::kTimeout;
  } else {
    set_error(err, "cannot connect to %s: %s", where, std::strerror(error));
    *code = ErrorCode::kConnectFailed;
  }
  return -1;
}

}  // namespace detail
}  // namespace edgelock
