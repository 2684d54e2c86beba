// Timing-edge tests: the connect as non-blocking steps. A reconnect inside
// a start/step call (a renewal after the server dropped the connection,
// an acquire to a host that never answers the SYN) must never hold up the
// caller's poll() loop: every step returns within a few milliseconds while
// the socket connect, the TLS handshake and AUTH wait on the server.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "../support/tls_server.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::RedisServer;

constexpr char kPassword[] = "connect-steps-pw";

TimePoint now() { return default_clock().now(); }

// The longest a step may take: a few syscalls and, for TLS, one handshake
// message's crypto; scaled like every timing bound of these tests (qemu).
Nanos step_bound() { return Millis(20) * test::slowdown(); }

// What one run of the loop saw.
struct LoopStats {
  Nanos longest_call{0};  // the longest single step() call (keeper or lease)
  Nanos longest_gap{0};   // the longest time between two ticks of the loop
  int calls = 0;
};

// A poll() loop with a 10 ms tick around a lease keeper: at `pause_at` the
// server side of the lock's connection is killed and the server stopped,
// at `resume_at` continued; the loop ends at `end`. Every step() call
// is timed.
class KeeperLoop {
 public:
  KeeperLoop(LeaseKeeper& keeper, Clock& clock) : keeper_(keeper), clock_(clock) {}

  template <typename AtPause, typename AtResume>
  LoopStats run(Nanos pause_at, Nanos resume_at, Nanos end, AtPause at_pause, AtResume at_resume) {
    LoopStats st;
    const TimePoint t0 = clock_.now();
    TimePoint last_tick = t0;
    bool paused = false;
    bool resumed = false;
    for (int turn = 0; turn < 100000 && clock_.now() - t0 < end; ++turn) {
      pollfd fds[kMaxWaitFds];
      const size_t n = keeper_.wait_fds(fds, kMaxWaitFds);
      const Deadline tick = Deadline::at(last_tick + Millis(10));
      const Deadline d = keeper_.next_deadline().min(tick);
      (void)poll(fds, n, d.poll_timeout_ms(clock_));
      const TimePoint before = clock_.now();
      if (before - last_tick > st.longest_gap) st.longest_gap = before - last_tick;
      if (tick.expired(clock_)) last_tick = before;
      keeper_.step();
      const Nanos took = clock_.now() - before;
      if (took > st.longest_call) st.longest_call = took;
      ++st.calls;
      // The test's own actions (CLIENT KILL, signals) are not the loop's
      // gap: the next tick counts from their end.
      if (!paused && clock_.now() - t0 >= pause_at) {
        at_pause();
        paused = true;
        last_tick = clock_.now();
      }
      if (paused && !resumed && clock_.now() - t0 >= resume_at) {
        at_resume();
        resumed = true;
        last_tick = clock_.now();
      }
    }
    return st;
  }

 private:
  LeaseKeeper& keeper_;
  Clock& clock_;
};

// The scenario shared by the plain and the TLS server: a lock held with a
// keeper renewing every 100 ms; the server kills every normal client and
// is stopped for 2 s, then continued. Each renewal meanwhile reconnects
// (socket, TLS, AUTH), and none of that may block a step() call.
void keep_through_kill_and_pause(const std::string& url, const ConnectionOptions& o,
                                 Connection& admin, RedisServer& server, const char* what) {
  Connection c;
  ASSERT_TRUE(c.init(url.c_str(), o).ok()) << c.last_error();
  Lock lock(c);
  LockOptions lo;
  lo.ttl = Millis(20000) * test::slowdown();
  ASSERT_TRUE(lock.init(Bytes::from_cstr("connect-steps"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << c.last_error();
  KeeperOptions ko;
  ko.renew_every = Millis(100);
  ko.retry_every = Millis(50);
  LeaseKeeper keeper(lock, ko);
  ASSERT_TRUE(keeper.start().ok());
  const uint32_t connects_before = c.stats().connects;
  const Nanos s = Millis(1000) * test::slowdown();
  KeeperLoop loop(keeper, c.clock());
  const LoopStats st = loop.run(
      s * 3 / 10, s * 23 / 10, s * 35 / 10,
      [&] {
        EXPECT_NE(test::run(admin, {"CLIENT", "KILL", "TYPE", "normal"}), "");
        server.pause();
      },
      [&] { server.resume(); });
  std::printf(
      "  %s: longest step() %lld ms, longest tick gap %lld ms, %d calls, %u "
      "connects, %u connect failures: %s\n",
      what, static_cast<long long>(test::ms(st.longest_call)),
      static_cast<long long>(test::ms(st.longest_gap)), st.calls, c.stats().connects,
      c.stats().connect_failures, c.last_error());
  EXPECT_LE(test::ms(st.longest_call), test::ms(step_bound())) << "a step blocked on the reconnect";
  // The tick's gap also holds the machine's scheduling noise: the period
  // plus 90 ms, as the non-blocking loop test allows a busy shared machine.
  EXPECT_LE(test::ms(st.longest_gap), test::ms((Millis(10) + Millis(90)) * test::slowdown()))
      << "the tick was held up";
  EXPECT_GT(c.stats().connects, connects_before) << "the test never reconnected";
  EXPECT_GT(c.stats().connect_failures, 0u) << "no reconnect met the stopped server";
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping) << keeper.last_status().to_string();
  EXPECT_TRUE(lock.held());
  keeper.stop();
  EXPECT_TRUE(lock.release().ok()) << c.last_error();
}

ConnectionOptions renewal_options() {
  ConnectionOptions o;  // connect_timeout stays at its default (2 s)
  o.command_timeout = Millis(500) * test::slowdown();
  o.reconnect_min = Millis(20);
  o.reconnect_max = Millis(100);
  return o;
}

std::string pw_url(const char* scheme, int port) {
  return std::string(scheme) + "://:" + kPassword + "@127.0.0.1:" + std::to_string(port);
}

TEST(ConnectSteps, ReconnectToPausedServerWithPasswordNeverBlocksService) {
  RedisServer server({"--requirepass", kPassword});
  ASSERT_TRUE(server.start());
  Connection admin;
  ASSERT_TRUE(test::open(admin, pw_url("redis", server.port())));
  keep_through_kill_and_pause(pw_url("redis", server.port()), renewal_options(), admin, server,
                              "plain + AUTH");
}

#ifdef EDGELOCK_TEST_TLS
TEST(ConnectSteps, TlsReconnectToPausedServerNeverBlocksService) {
  const test::TestCerts& certs = test::shared_certs();
  ASSERT_TRUE(certs.ok());
  test::TlsRedis server(certs, "server", false, {"--requirepass", kPassword});
  ASSERT_TRUE(server.start());
  Connection admin;
  ASSERT_TRUE(test::open(admin, pw_url("redis", server.plain_port())));
  const std::string ca = certs.path("ca.crt");
  ConnectionOptions o = renewal_options();
  o.tls.ca_file = ca.c_str();
  keep_through_kill_and_pause(pw_url("rediss", server.tls_port()), o, admin, server.server(),
                              "TLS + AUTH");
}
#endif

// A listener whose accept queue is full: the kernel drops further SYNs, so
// a connect to it stays in SYN_SENT (retransmitting) until given up.
class FullBacklog {
 public:
  bool start() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listener_, 0) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return false;
    }
    port_ = ntohs(a.sin_port);
    // Fill the queue: connect until one is not accepted by the kernel.
    for (int i = 0; i < 16; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) return false;
      fillers_.push_back(fd);
      (void)connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 100) == 0) return true;  // this SYN went unanswered
    }
    return false;
  }
  ~FullBacklog() {
    for (int fd : fillers_) close(fd);
    if (listener_ >= 0) close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

TEST(ConnectSteps, UnansweredSynTimesOutWithoutBlockingStep) {
  FullBacklog peer;
  ASSERT_TRUE(peer.start()) << "could not fill a loopback accept queue";
  ConnectionOptions o;
  o.connect_timeout = Millis(300) * test::slowdown();
  o.command_timeout = Millis(5000) * test::slowdown();
  Connection c;
  ASSERT_TRUE(c.init(("redis://127.0.0.1:" + std::to_string(peer.port())).c_str(), o).ok());
  Lock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("connect-steps-syn")).ok());
  Clock& clock = c.clock();
  const TimePoint t0 = clock.now();
  Status s = lock.start_try_acquire();
  Nanos longest = clock.now() - t0;
  int steps = 0;
  for (; steps < 100000 && s.code() == ErrorCode::kInProgress; ++steps) {
    pollfd fds[kMaxWaitFds];
    const size_t n = lock.wait_fds(fds, kMaxWaitFds);
    EXPECT_LE(lock.next_deadline().when(), t0 + o.connect_timeout + Millis(5))
        << "the loop must wake when the connect gives up";
    (void)poll(fds, n, lock.next_deadline().poll_timeout_ms(clock));
    const TimePoint before = clock.now();
    s = lock.step();
    if (clock.now() - before > longest) longest = clock.now() - before;
  }
  const Nanos took = clock.now() - t0;
  std::printf("  unanswered SYN: %s after %lld ms, %d steps, longest call %lld ms: %s\n",
              s.to_string(), static_cast<long long>(test::ms(took)), steps,
              static_cast<long long>(test::ms(longest)), c.last_error());
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_NE(std::string(c.last_error()).find("timed out"), std::string::npos) << c.last_error();
  EXPECT_LE(test::ms(longest), test::ms(step_bound())) << "a step waited on the SYN";
  EXPECT_GE(test::ms(took), test::ms(o.connect_timeout - Millis(5)));
  EXPECT_LE(test::ms(took), test::ms(o.connect_timeout + Millis(200) * test::slowdown()));
  EXPECT_GT(steps, 0);
  EXPECT_EQ(c.stats().connect_failures, 1u);
  EXPECT_FALSE(lock.held());
}

// The blocking calls loop over the same steps: connect() to the same
// peer takes connect_timeout and fails with kTimeout, as before.
TEST(ConnectSteps, BlockingConnectToUnansweredSynTimesOut) {
  FullBacklog peer;
  ASSERT_TRUE(peer.start()) << "could not fill a loopback accept queue";
  ConnectionOptions o;
  o.connect_timeout = Millis(300) * test::slowdown();
  Connection c;
  ASSERT_TRUE(c.init(("redis://127.0.0.1:" + std::to_string(peer.port())).c_str(), o).ok());
  const TimePoint t0 = now();
  const Status s = c.connect();
  const Nanos took = now() - t0;
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_GE(test::ms(took), test::ms(o.connect_timeout - Millis(5)));
  EXPECT_LE(test::ms(took), test::ms(o.connect_timeout + Millis(200) * test::slowdown()));
  EXPECT_FALSE(c.is_connected());
}

}  // namespace
}  // namespace edgelock
