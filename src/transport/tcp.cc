// The built-in transport: the open in steps (a non-blocking connect,
// socket_connect.cc, then the TLS handshake, tls.cc), then non-blocking
// send()/recv() on the socket, or mbedTLS records over it; the caller's
// poll() waits.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error_text.h"
#include "edgelock/detail/socket_transport.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

static_assert(kWantRead == POLLIN && kWantWrite == POLLOUT, "readiness bits are poll()'s");

namespace {

constexpr int kMaxInterrupts = 1000;

// Upper bound on wait rounds of a blocking open: each either moves the
// open or waits on its deadline; this only guards against a peer that
// keeps the socket ready without progress.
constexpr int kMaxOpenRounds = 1 << 16;

// The connected socket goes back to blocking mode so a read allowed to
// wait can wait in recv() itself; every other call passes MSG_DONTWAIT.
Status socket_ready(TransportState& t, ErrorText& err) {
  const auto slice_us = std::chrono::duration_cast<std::chrono::microseconds>(kTransportWaitSlice);
  const timeval slice{0, static_cast<suseconds_t>(slice_us.count())};
  const int flags = fcntl(t.fd, F_GETFL, 0);
  if (flags < 0 || fcntl(t.fd, F_SETFL, flags & ~O_NONBLOCK) < 0 ||
      setsockopt(t.fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) < 0) {
    char where[kMaxHostLen + 16];
    format_endpoint(*t.ep, where, sizeof where);
    set_error(err, "cannot connect to %s: %s", where, std::strerror(errno));
    return ErrorCode::kConnectFailed;
  }
  return Status();
}

// The connect phase: once connected, TLS starts (or the stream is open).
Status connect_phase(TransportState& t, Clock& clock, ErrorText& err) {
  const Result<bool> done = socket_connect_step(t, clock, err);
  if (!done.ok() || !done.value()) return done.status();
  EDGELOCK_TRY(socket_ready(t, err));
  if (t.ep->scheme != Scheme::kTls) {
    t.phase = OpenPhase::kOpen;
    return Status();
  }
  EDGELOCK_TRY(tls_start(t, *t.ep, *t.tls_opts, clock, err));
  t.phase = OpenPhase::kTls;
  return Status();
}

Status open_steps(TransportState& t, Clock& clock, ErrorText& err) {
  if (t.phase == OpenPhase::kConnecting) EDGELOCK_TRY(connect_phase(t, clock, err));
  // Straight on: the ClientHello goes out in the step that connected.
  if (t.phase == OpenPhase::kTls) {
    const Result<bool> done = tls_step(t, clock, err);
    if (!done.ok()) return done.status();
    if (done.value()) t.phase = OpenPhase::kOpen;
  }
  return Status();
}

}  // namespace

Status transport_start_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                            const TlsOptions& tls, Deadline deadline, ErrorText& err) {
  transport_close(t);
  t.ep = &ep;
  t.addrs = &addrs;
  t.tls_opts = &tls;
  t.deadline = deadline;
  t.next_addr = 0;
  t.phase = OpenPhase::kConnecting;
  const Status s = socket_start_connect(t, err);
  if (!s.ok()) transport_close(t);
  return s;
}

Status transport_open_step(TransportState& t, Clock& clock, ErrorText& err) {
  if (t.phase == OpenPhase::kOpen) return Status();
  if (t.phase == OpenPhase::kClosed) {
    set_error(err, "no open under way");
    return ErrorCode::kInvalidArgument;
  }
  const Status s = open_steps(t, clock, err);
  if (!s.ok()) transport_close(t);
  return s;
}

Status transport_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                      const TlsOptions& tls, Deadline deadline, Clock& clock, ErrorText& err) {
  EDGELOCK_TRY(transport_start_open(t, ep, addrs, tls, deadline, err));
  for (int round = 0; round < kMaxOpenRounds; ++round) {
    EDGELOCK_TRY(transport_open_step(t, clock, err));
    if (t.phase == OpenPhase::kOpen) return Status();
    pollfd p{t.fd, t.want_events, 0};
    if (poll(&p, 1, t.deadline.poll_timeout_ms(clock)) < 0 && errno != EINTR) {
      set_error(err, "poll: %s", std::strerror(errno));
      transport_close(t);
      return ErrorCode::kIo;
    }
  }
  set_error(err, "open made no progress");
  transport_close(t);
  return ErrorCode::kTimeout;
}

void transport_close(TransportState& t) {
  if (t.tls) tls_close(t);
  if (t.fd >= 0) ::close(t.fd);
  t.fd = -1;
  t.want_events = 0;
  t.phase = OpenPhase::kClosed;
}

Status SocketTransport::open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                             Deadline deadline, Clock& clock, ErrorText& err) {
  return transport_open(state_, ep, addrs, tls, deadline, clock, err);
}

Status SocketTransport::start_open(const Endpoint& ep, const ResolvedHost& addrs,
                                   const TlsOptions& tls, Deadline deadline, Clock& clock,
                                   ErrorText& err) {
  (void)clock;
  return transport_start_open(state_, ep, addrs, tls, deadline, err);
}

Status SocketTransport::open_step(Clock& clock, ErrorText& err) {
  return transport_open_step(state_, clock, err);
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
