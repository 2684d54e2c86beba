// The built-in transport: hiredis connects (socket_connect.cc), then
// non-blocking send()/recv() on the socket, or mbedTLS records over it
// (tls.cc); poll() waits.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "edgelock/detail/socket_transport.h"
#include "error_text.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

static_assert(kWantRead == POLLIN && kWantWrite == POLLOUT, "readiness bits are poll()'s");

namespace {

constexpr int kMaxInterrupts = 1000;

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
  // The socket goes back to blocking mode so a read allowed to wait can
  // wait in recv() itself; every other call passes MSG_DONTWAIT.
  const auto slice_us = std::chrono::duration_cast<std::chrono::microseconds>(kTransportWaitSlice);
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
  if (t.fd >= 0) ::close(t.fd);
  t.fd = -1;
  t.want_events = 0;
}

Status SocketTransport::open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                             Deadline deadline, Clock& clock, ErrorText& err) {
  return transport_open(state_, ep, addrs, tls, deadline, clock, err);
}

void SocketTransport::close() { transport_close(state_); }

Result<size_t> SocketTransport::write_some(const uint8_t* data, size_t n, ErrorText& err) {
  if (state_.tls) return tls_write(state_, data, n, err);
  for (;;) {
    const ssize_t w = send(state_.fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) return static_cast<size_t>(w);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return static_cast<size_t>(0);
    set_error(err, "write: %s", std::strerror(errno));
    return errno == EPIPE || errno == ECONNRESET ? ErrorCode::kConnectionClosed : ErrorCode::kIo;
  }
}

Result<size_t> SocketTransport::read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) {
  // TLS never waits here: mbedTLS may need to write first.
  if (state_.tls) return tls_read(state_, dst, cap, err);
  const ssize_t n = recv(state_.fd, dst, cap, may_wait ? 0 : MSG_DONTWAIT);
  if (n > 0) return static_cast<size_t>(n);
  if (n == 0) {
    set_error(err, "server closed the connection");
    return ErrorCode::kConnectionClosed;
  }
  // EINTR too: the caller's loop checks its deadline and comes back.
  if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return static_cast<size_t>(0);
  set_error(err, "read: %s", std::strerror(errno));
  return errno == ECONNRESET ? ErrorCode::kConnectionClosed : ErrorCode::kIo;
}

Result<size_t> SocketTransport::wait(TransportWait* items, size_t n, Deadline deadline,
                                     Clock& clock, ErrorText& err) {
  pollfd fds[kMaxQuorumServers];
  if (n > kMaxQuorumServers) n = kMaxQuorumServers;
  for (size_t i = 0; i < n; ++i) fds[i] = pollfd{items[i].transport->fd(), items[i].events, 0};
  // A signal restarts the wait with what is left of the deadline: 0 ready
  // means the deadline passed. Bounded: a signal storm ends as a timeout.
  int rc = -1;
  for (int i = 0; i < kMaxInterrupts && rc < 0; ++i) {
    rc = poll(fds, n, deadline.poll_timeout_ms(clock));
    if (rc < 0 && errno != EINTR) {
      set_error(err, "poll: %s", std::strerror(errno));
      return ErrorCode::kIo;
    }
  }
  for (size_t i = 0; i < n; ++i) items[i].ready = rc > 0 ? fds[i].revents : 0;
  return static_cast<size_t>(rc > 0 ? rc : 0);
}

bool SocketTransport::has_pending_input() const { return state_.tls && tls_has_pending(state_); }

bool SocketTransport::has_stale_input() const {
  if (state_.fd < 0) return false;
  // A TLS peer may send records (session tickets) between replies.
  if (state_.tls) return false;
  uint8_t byte = 0;
  const ssize_t n = recv(state_.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  // > 0: unsolicited bytes; 0: the peer closed; error other than "nothing
  // there": the socket is broken (RST) - all mean reconnect first.
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace detail
}  // namespace edgelock
