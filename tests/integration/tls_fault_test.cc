// TLS failures a real redis-server cannot produce on its own: a peer that
// accepts TCP but never answers the handshake, and a reply record cut short
// by a connection reset (through a small proxy).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "../support/tls_server.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

int listen_loopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Forwards one client to upstream; once cut() is called, the next chunk
// from upstream goes out as its first 10 bytes only (a record header and 5
// bytes of body), then the client gets a TCP reset.
class CuttingProxy {
 public:
  explicit CuttingProxy(int upstream) : upstream_(upstream) {
    listen_fd_ = listen_loopback(&port_);
    thread_ = std::thread([this] { run(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  void cut() { cut_ = true; }

 private:
  void run() {
    pollfd l{listen_fd_, POLLIN, 0};
    for (int i = 0; i < 200 && !stop_ && poll(&l, 1, 50) == 0; ++i) {
    }
    if (stop_ || !(l.revents & POLLIN)) return;
    const int client = accept(listen_fd_, nullptr, nullptr);
    const int server = connect_loopback(upstream_);
    for (int i = 0; i < 2000 && !stop_ && client >= 0 && server >= 0; ++i) {  // <= 20 s
      pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (poll(p, 2, 10) <= 0) continue;
      char buf[4096];
      if (p[0].revents & POLLIN) {
        const ssize_t n = recv(client, buf, sizeof buf, 0);
        if (n <= 0 || send(server, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      if (p[1].revents & POLLIN) {
        const ssize_t n = recv(server, buf, sizeof buf, 0);
        if (n <= 0) break;
        if (cut_ && n > 10) {
          if (send(client, buf, 10, MSG_NOSIGNAL) != 10) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          linger lg{1, 0};  // close now with RST
          setsockopt(client, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
          break;
        }
        if (send(client, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
    }
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }

  int upstream_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false}, cut_{false};
  std::thread thread_;
};

// Accepts one client, keeps what it sends first (the ClientHello), answers
// with `reply` and closes: a TLS peer scripted byte by byte.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::string reply) : reply_(std::move(reply)) {
    listen_fd_ = listen_loopback(&port_);
    thread_ = std::thread([this] { run(); });
  }
  ~ScriptedPeer() {
    stop_ = true;
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }
  // What the client sent; valid after the client's connect returned.
  std::string received() {
    for (int i = 0; i < 500 && !done_; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done_ ? received_ : std::string();
  }

 private:
  void run() {
    pollfd l{listen_fd_, POLLIN, 0};
    for (int i = 0; i < 500 && !stop_ && poll(&l, 1, 20) == 0; ++i) {
    }
    const int fd = (l.revents & POLLIN) ? accept(listen_fd_, nullptr, nullptr) : -1;
    // One whole TLS record: the 5-byte header says how long it is.
    for (int i = 0; i < 500 && fd >= 0 && !stop_ && !whole_record(); ++i) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<size_t>(n));
    }
    if (fd >= 0) {
      if (send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL) < 0) {
        // The client may be gone already; what it sent is what matters.
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      close(fd);
    }
    done_ = true;
  }
  bool whole_record() const {
    if (received_.size() < 5) return false;
    const size_t len = static_cast<uint8_t>(received_[3]) << 8 | static_cast<uint8_t>(received_[4]);
    return received_.size() >= 5 + len;
  }

  std::string reply_;
  std::string received_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false}, done_{false};
  std::thread thread_;
};

// The server_name extension of a ClientHello record, "" if there is none,
// "?" if the record is no ClientHello (RFC 8446 4.1.2, RFC 6066 3).
std::string sni_of(const std::string& rec) {
  const auto* p = reinterpret_cast<const uint8_t*>(rec.data());
  const size_t end = rec.size();
  auto u16 = [&](size_t at) { return static_cast<size_t>(p[at] << 8 | p[at + 1]); };
  if (end < 5 + 4 + 2 + 32 + 1 || p[0] != 22 || p[5] != 1) return "?";
  size_t at = 5 + 4 + 2 + 32;
  at += 1 + p[at];  // session id
  if (at + 2 > end) return "?";
  at += 2 + u16(at);  // cipher suites
  if (at + 1 > end) return "?";
  at += 1 + p[at];  // compression methods
  if (at + 2 > end) return "?";
  const size_t ext_end = std::min(end, at + 2 + u16(at));
  at += 2;
  for (int i = 0; i < 100 && at + 4 <= ext_end; ++i) {
    const size_t type = u16(at), len = u16(at + 2);
    at += 4;
    if (type == 0 && len >= 5 && at + len <= ext_end) {  // list len, type, name len, name
      return rec.substr(at + 5, u16(at + 3));
    }
    at += len;
  }
  return "";
}

ConnectionOptions tls_options(const std::string& ca) {
  ConnectionOptions o;
  o.connect_timeout = Millis(3000) * test::slowdown();
  o.command_timeout = Millis(3000) * test::slowdown();
  o.tls.ca_file = ca.c_str();
  return o;
}

int64_t elapsed_ms(std::chrono::steady_clock::time_point t0) {
  using std::chrono::milliseconds;
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

TEST(TlsFault, HandshakeTimeoutHasItsOwnDeadline) {
  int port = 0;
  const int silent = listen_loopback(&port);  // never accepts: TCP connects, TLS hangs
  ASSERT_GE(silent, 0);
  const std::string ca = test::shared_certs().path("ca.crt");
  ConnectionOptions o = tls_options(ca);
  o.connect_timeout = Millis(5000) * test::slowdown();
  o.tls.handshake_timeout = Millis(300) * test::slowdown();
  Connection c;
  ASSERT_TRUE(c.init(("rediss://127.0.0.1:" + std::to_string(port)).c_str(), o).ok());
  auto t0 = std::chrono::steady_clock::now();
  Status s = c.connect();
  int64_t ms = elapsed_ms(t0);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_NE(std::string(c.last_error()).find("handshake timed out"), std::string::npos);
  EXPECT_GE(ms, 250 * test::slowdown());
  EXPECT_LE(ms, 1000 * test::slowdown()) << "the handshake deadline, not connect_timeout";
  std::printf("  silent server: %s (%lld ms)\n", c.last_error(), static_cast<long long>(ms));

  // The connect deadline caps the handshake's own.
  o.connect_timeout = Millis(300) * test::slowdown();
  o.tls.handshake_timeout = Millis(5000) * test::slowdown();
  Connection d;
  ASSERT_TRUE(d.init(("rediss://127.0.0.1:" + std::to_string(port)).c_str(), o).ok());
  Lock lock(d);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("never")).ok());
  t0 = std::chrono::steady_clock::now();
  s = lock.try_acquire();
  ms = elapsed_ms(t0);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << d.last_error();
  EXPECT_LE(ms, 1000 * test::slowdown());
  close(silent);
}

TEST(TlsFault, ResetMidRecord) {
  const test::TestCerts& certs = test::shared_certs();
  ASSERT_TRUE(certs.ok());
  test::TlsRedis server(certs, "server");
  ASSERT_TRUE(server.start());
  CuttingProxy proxy(server.tls_port());
  const std::string ca = certs.path("ca.crt");
  Connection c;
  ASSERT_TRUE(
      c.init(("rediss://127.0.0.1:" + std::to_string(proxy.port())).c_str(), tls_options(ca)).ok());
  ASSERT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();
  proxy.cut();
  const Bytes ping[1] = {Bytes::from_cstr("PING")};
  const auto t0 = std::chrono::steady_clock::now();
  const Deadline deadline = Deadline::after(c.clock(), Millis(3000) * test::slowdown());
  const Result<const Reply*> r = c.command(ping, deadline);
  EXPECT_EQ(r.status().code(), ErrorCode::kTls) << c.last_error();
  EXPECT_NE(std::string(c.last_error()).find("mid-record"), std::string::npos) << c.last_error();
  EXPECT_LE(elapsed_ms(t0), 1500 * test::slowdown());
  EXPECT_FALSE(c.is_connected());
  std::printf("  cut reply: %s\n", c.last_error());
}

// RFC 6066: no IP address in SNI. An IP literal is verified against the
// certificate's IP SANs instead (TlsTest.CaPemInMemoryAndIpSan); a name is
// sent.
TEST(TlsFault, NoSniForIpLiterals) {
  const std::string ca = test::shared_certs().path("ca.crt");
  ScriptedPeer by_ip("");
  Connection c;
  ASSERT_TRUE(
      c.init(("rediss://127.0.0.1:" + std::to_string(by_ip.port())).c_str(), tls_options(ca)).ok());
  EXPECT_FALSE(c.connect().ok());
  const std::string hello = by_ip.received();
  EXPECT_EQ(sni_of(hello), "") << hello.size() << " bytes received";

  ScriptedPeer by_name("");
  ConnectionOptions o = tls_options(ca);
  o.tls.server_name = "localhost";
  Connection d;
  ASSERT_TRUE(d.init(("rediss://127.0.0.1:" + std::to_string(by_name.port())).c_str(), o).ok());
  EXPECT_FALSE(d.connect().ok());
  EXPECT_EQ(sni_of(by_name.received()), "localhost");
}

// A fatal alert in clear text (before any key exists) is named with its
// number; the connection fails with kTls and nothing is acquired.
TEST(TlsFault, ClearTextAlertIsNamed) {
  const std::string ca = test::shared_certs().path("ca.crt");
  ScriptedPeer peer(std::string("\x15\x03\x03\x00\x02\x02\x28", 7));  // fatal handshake_failure
  Connection c;
  ASSERT_TRUE(
      c.init(("rediss://127.0.0.1:" + std::to_string(peer.port())).c_str(), tls_options(ca)).ok());
  const Status s = c.connect();
  EXPECT_EQ(s.code(), ErrorCode::kTls) << c.last_error();
  EXPECT_NE(std::string(c.last_error()).find("fatal alert 40 from server (handshake failure)"),
            std::string::npos)
      << c.last_error();
  std::printf("  clear-text alert: %s\n", c.last_error());
}

// Something that is no TLS record in answer to the ClientHello.
TEST(TlsFault, NotTlsReplyIsNamed) {
  const std::string ca = test::shared_certs().path("ca.crt");
  ScriptedPeer peer("-ERR unknown command\r\n");
  Connection c;
  ASSERT_TRUE(
      c.init(("rediss://127.0.0.1:" + std::to_string(peer.port())).c_str(), tls_options(ca)).ok());
  const Status s = c.connect();
  EXPECT_EQ(s.code(), ErrorCode::kTls) << c.last_error();
  EXPECT_NE(std::string(c.last_error()).find("does not speak TLS"), std::string::npos)
      << c.last_error();
  std::printf("  not TLS: %s\n", c.last_error());
}

}  // namespace
}  // namespace edgelock
