#include "world/sim_transport.h"

#include <cstdio>
#include <cstring>

#include "model/fail.h"

namespace edgelock {
namespace sim {

int64_t SimTransport::true_deadline(Deadline d) const {
  if (d.is_never()) return -1;
  return w_->true_at_local(client_, d.when().time_since_epoch().count());
}

Status SimTransport::open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                          Deadline deadline, Clock& clock, ErrorText& err) {
  (void)addrs;
  (void)tls;
  (void)clock;
  close();
  const int server = static_cast<int>(ep.port) - kSimPortBase;
  if (w_->client(client_).dead) {
    std::snprintf(err, sizeof(ErrorText), "sim: the process is dead");
    return ErrorCode::kConnectFailed;
  }
  if (server < 0 || server >= static_cast<int>(w_->server_count())) {
    std::snprintf(err, sizeof(ErrorText), "sim: no server at port %d", ep.port);
    return ErrorCode::kConnectFailed;
  }
  ErrorCode why = ErrorCode::kOk;
  const int id = w_->connect(client_, server, true_deadline(deadline), &why);
  if (id < 0) {
    std::snprintf(err, sizeof(ErrorText), "sim: connect to s%d %s", server,
                  why == ErrorCode::kTimeout ? "timed out" : "refused");
    return why;
  }
  conn_ = id;
  return Status();
}

void SimTransport::close() {
  if (conn_ < 0) return;
  w_->client_close(conn_);
  conn_ = -1;
}

bool SimTransport::readable() const {
  if (conn_ < 0) return false;
  if (w_->client(client_).dead) return true;  // the read fails at once
  const SimConn& c = w_->conn(conn_);
  return !c.rx.empty() || c.state != SimConn::State::kOpen || c.server_fin;
}

Result<size_t> SimTransport::write_some(const uint8_t* data, size_t n, ErrorText& err) {
  if (conn_ < 0) return ErrorCode::kConnectionClosed;
  const SimConn& c = w_->conn(conn_);
  if (c.state != SimConn::State::kOpen || c.server_fin || c.client_closed) {
    std::snprintf(err, sizeof(ErrorText), "sim: send: connection reset by peer");
    return ErrorCode::kConnectionClosed;
  }
  w_->client_send(conn_, data, n);
  return n;
}

Result<size_t> SimTransport::read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) {
  if (conn_ < 0) return ErrorCode::kConnectionClosed;
  if (may_wait && !readable()) {
    // A socket's recv() with its receive timeout: up to one slice.
    const int64_t until_local = w_->local_now(client_) + kTransportWaitSlice.count();
    const int64_t until = w_->true_at_local(client_, until_local);
    for (int i = 0; i < 100000 && !readable() && w_->local_now(client_) < until_local; ++i) {
      w_->block(client_, until);
    }
  }
  SimConn& c = w_->conn(conn_);
  if (c.client_closed) return ErrorCode::kConnectionClosed;  // the process died
  if (!c.rx.empty()) {
    const size_t k = c.rx.size() < cap ? c.rx.size() : cap;
    std::memcpy(dst, c.rx.data(), k);
    c.rx.erase(0, k);
    return k;
  }
  if (c.state != SimConn::State::kOpen || c.server_fin) {
    std::snprintf(err, sizeof(ErrorText), "sim: recv: connection %s",
                  c.server_fin ? "closed by the server" : "reset by peer");
    return ErrorCode::kConnectionClosed;
  }
  return static_cast<size_t>(0);
}

Result<size_t> SimTransport::wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                                  ErrorText& err) {
  (void)clock;
  (void)err;
  const int64_t until = true_deadline(deadline);
  for (int round = 0; round < 1000000; ++round) {
    size_t ready = 0;
    for (size_t i = 0; i < n; ++i) {
      const SimTransport* t = static_cast<const SimTransport*>(items[i].transport);
      short r = 0;
      if ((items[i].events & kWantRead) && t->readable()) r |= kWantRead;
      if ((items[i].events & kWantWrite) && t->conn_ >= 0) r |= kWantWrite;
      items[i].ready = r;
      if (r) ++ready;
    }
    if (ready > 0) return ready;
    if (until >= 0 && w_->now() >= until) return static_cast<size_t>(0);
    w_->block(client_, until);
  }
  model_fail("sim transport: wait did not end");
}

bool SimTransport::has_stale_input() const { return readable(); }

namespace {

short poll_ready(World& w, const pollfd& p) {
  const int id = p.fd - kSimFdBase;
  if (p.fd < kSimFdBase || id >= static_cast<int>(w.conn_count())) return POLLNVAL;
  const SimConn& c = w.conn(id);
  if (c.state != SimConn::State::kOpen) return static_cast<short>(POLLERR | POLLHUP);
  short r = 0;
  if ((p.events & POLLIN) && (!c.rx.empty() || c.server_fin)) r |= POLLIN;
  if (c.server_fin) r |= POLLHUP;
  if (p.events & POLLOUT) r |= POLLOUT;
  return r;
}

}  // namespace

size_t sim_poll(World& w, int client, pollfd* fds, size_t n, Deadline deadline) {
  // A deadline already past (kNow is the clock's origin) is due at once.
  int64_t until = -1;
  if (!deadline.is_never()) {
    const int64_t local = deadline.when().time_since_epoch().count();
    until = local <= w.local_now(client) ? w.now() : w.true_at_local(client, local);
  }
  for (int round = 0; round < 1000000; ++round) {
    size_t ready = 0;
    for (size_t i = 0; i < n; ++i) {
      fds[i].revents = poll_ready(w, fds[i]);
      if (fds[i].revents) ++ready;
    }
    if (ready > 0 || (until >= 0 && w.now() >= until)) return ready;
    if (until < 0 && n == 0) {
      model_fail("sim_poll: c%d waits on no descriptor and no deadline", client);
    }
    w.block(client, until);
  }
  model_fail("sim_poll: wait did not end");
}

}  // namespace sim
}  // namespace edgelock
