// TCP and unix-socket transport: hiredis connects (socket_connect.cc), then
// non-blocking I/O on it.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error_text.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

namespace {

Status fail_setup(TransportState& t, const Endpoint& ep, const char* why, ErrorText& err) {
  char where[kMaxHostLen + 16];
  format_endpoint(ep, where, sizeof where);
  set_error(err, "cannot connect to %s: %s", where, why);
  transport_close(t);
  return ErrorCode::kConnectFailed;
}

}  // namespace

Status transport_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                      const TlsOptions& tls, Deadline deadline, Clock& clock, ErrorText& err) {
  transport_close(t);
  ErrorCode code = ErrorCode::kConnectFailed;
  t.fd = connect_socket(ep, addrs, deadline, clock, err, &code);
  if (t.fd < 0) return code;
  // The socket goes back to blocking mode so transport_read_blocking() can
  // wait in recv() itself; every other call passes MSG_DONTWAIT.
  const auto slice_us = std::chrono::duration_cast<std::chrono::microseconds>(kBlockingReadSlice);
  const timeval slice{0, static_cast<suseconds_t>(slice_us.count())};
  const int flags = fcntl(t.fd, F_GETFL, 0);
  if (flags < 0 || fcntl(t.fd, F_SETFL, flags & ~O_NONBLOCK) < 0 ||
      setsockopt(t.fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) < 0) {
    return fail_setup(t, ep, std::strerror(errno), err);
  }
  if (ep.scheme == Scheme::kTls) {
    const Status s = tls_open(t, ep, tls, deadline, clock, err);
    if (!s.ok()) {
      transport_close(t);
      return s;
    }
  }
  return Status();
}

void transport_close(TransportState& t) {
  if (t.tls) tls_close(t);
  t.parser.clear();
  if (t.fd >= 0) ::close(t.fd);
  t.fd = -1;
  t.want_events = 0;
}

Result<size_t> transport_write(TransportState& t, const uint8_t* data, size_t n, ErrorText& err) {
  if (t.tls) return tls_write(t, data, n, err);
  for (;;) {
    const ssize_t w = send(t.fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) return static_cast<size_t>(w);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return static_cast<size_t>(0);
    set_error(err, "write: %s", std::strerror(errno));
    return errno == EPIPE || errno == ECONNRESET ? ErrorCode::kConnectionClosed : ErrorCode::kIo;
  }
}

namespace {

// recv() into the parser's free space; `flags` decide whether it waits.
Result<size_t> read_plain(TransportState& t, uint8_t* dst, size_t avail, int flags, ErrorText& err) {
  const ssize_t n = recv(t.fd, dst, avail, flags);
  if (n > 0) {
    t.parser.commit(static_cast<size_t>(n));
    return static_cast<size_t>(n);
  }
  if (n == 0) {
    set_error(err, "server closed the connection");
    return ErrorCode::kConnectionClosed;
  }
  // EINTR too: the caller's loop checks its deadline and comes back.
  if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return static_cast<size_t>(0);
  set_error(err, "read: %s", std::strerror(errno));
  return errno == ECONNRESET ? ErrorCode::kConnectionClosed : ErrorCode::kIo;
}

uint8_t* read_space(TransportState& t, size_t* avail, ErrorText& err) {
  uint8_t* dst = t.parser.space(avail);
  if (*avail == 0) set_error(err, "reply exceeds the %zu-byte receive buffer", kRxBufferSize);
  return *avail > 0 ? dst : nullptr;
}

}  // namespace

Result<size_t> transport_read(TransportState& t, ErrorText& err) {
  size_t avail = 0;
  uint8_t* dst = read_space(t, &avail, err);
  if (!dst) return ErrorCode::kBufferTooSmall;
  if (t.tls) {
    Result<size_t> r = tls_read(t, dst, avail, err);
    if (r.ok() && r.value() > 0) t.parser.commit(r.value());
    return r;
  }
  return read_plain(t, dst, avail, MSG_DONTWAIT, err);
}

Result<size_t> transport_read_blocking(TransportState& t, ErrorText& err) {
  if (t.tls) return static_cast<size_t>(0);
  size_t avail = 0;
  uint8_t* dst = read_space(t, &avail, err);
  if (!dst) return ErrorCode::kBufferTooSmall;
  return read_plain(t, dst, avail, 0, err);
}

Result<const Reply*> transport_next_reply(TransportState& t, ErrorText& err) {
  const Reply* reply = nullptr;
  const char* why = "";
  const Status s = t.parser.next(&reply, &why);
  if (s.ok()) return reply;
  if (s.code() == ErrorCode::kProtocol) {
    set_error(err, "protocol error: %s", why);
  } else {
    set_error(err, "reply larger than the fixed reply capacities: %s", why);
  }
  return s;
}

size_t transport_unread(const TransportState& t) { return t.parser.unread(); }

bool transport_stale_input(const TransportState& t) {
  if (t.fd < 0) return false;
  if (transport_unread(t) > 0) return true;
  if (t.tls) return false;
  uint8_t byte = 0;
  const ssize_t n = recv(t.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // > 0: unsolicited bytes; 0: the peer closed; error other than "nothing
  // there": the socket is broken (RST) - all mean reconnect first.
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

bool transport_has_pending_input(const TransportState& t) {
  return t.tls && tls_has_pending(t);
}

}  // namespace detail
}  // namespace edgelock
