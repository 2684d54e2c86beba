// The non-blocking API in a single-threaded loop: the loop must answer a
// heartbeat timer every 10 ms (x EDGELOCK_TEST_SLOWDOWN) and keeps doing so
// while acquire (Lock, Semaphore, ReentrantLock, QuorumLock), the keeper's
// renewals and release wait on servers that are SIGSTOPped (paused) for far
// longer than that, or on links (DelayProxy) slowed past the round budget.
// Each test prints its longest heartbeat gap and its longest call into the
// library.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::run;
using Steady = std::chrono::steady_clock;

Nanos scaled(Nanos d) { return d * test::slowdown(); }

// The application's own duty: a periodic timer it must answer. Records the
// longest time between two answers.
class Heartbeat {
 public:
  explicit Heartbeat(Nanos period) : period_(period) {
    fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(period);
    itimerspec its{};
    its.it_interval.tv_sec = static_cast<time_t>(s.count());
    its.it_interval.tv_nsec = static_cast<long>((period - s).count());
    its.it_value = its.it_interval;
    timerfd_settime(fd_, 0, &its, nullptr);
    last_ = Steady::now();
  }
  ~Heartbeat() { close(fd_); }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  int fd() const { return fd_; }
  Nanos period() const { return period_; }
  void answer() {
    uint64_t n = 0;
    if (read(fd_, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) return;
    const Steady::time_point now = Steady::now();
    max_gap_ = std::max<Nanos>(max_gap_, now - last_);
    last_ = now;
    beats_ += n;
  }
  // The longest gap so far, the one still open included.
  Nanos max_gap() const { return std::max<Nanos>(max_gap_, Steady::now() - last_); }
  uint64_t beats() const { return beats_; }

 private:
  int fd_ = -1;
  Nanos period_;
  Steady::time_point last_;
  Nanos max_gap_{0};
  uint64_t beats_ = 0;
};

// From `from` to `to` after the loop's start, as the loop turns: pauses
// some servers (SIGSTOP / SIGCONT by PID) and slows some links to `slow`
// each way (a partition that heals).
struct Stall {
  std::vector<RedisServer*> servers;
  Nanos from{0};
  Nanos to{0};
  std::vector<test::DelayProxy*> links;
  Nanos slow{0};
  bool paused = false;
  bool over = false;

  static Stall pausing(std::vector<RedisServer*> servers, Nanos from, Nanos to) {
    Stall s;
    s.servers = std::move(servers);
    s.from = from;
    s.to = to;
    return s;
  }
  void tick(Nanos t) {
    if (!paused && !over && t >= from) {
      for (RedisServer* s : servers) s->pause();
      for (test::DelayProxy* l : links) l->set_delay(slow);
      paused = true;
    }
    if (paused && t >= to) {
      for (RedisServer* s : servers) s->resume();
      for (test::DelayProxy* l : links) l->set_delay(Nanos::zero());
      paused = false;
      over = true;
    }
  }
};

// The application's loop: one poll() over the heartbeat and the library's
// descriptors, bounded by the library's deadline and the heartbeat period.
class Loop {
 public:
  explicit Loop(Clock& clock) : clock_(clock), hb_(scaled(Millis(10))), t0_(Steady::now()) {}

  Nanos elapsed() const { return Steady::now() - t0_; }
  void turn(const pollfd* lib, size_t n, Deadline d) {
    pollfd fds[1 + kMaxWaitFds] = {{hb_.fd(), POLLIN, 0}};
    std::copy(lib, lib + std::min(n, kMaxWaitFds), fds + 1);
    int timeout = d.poll_timeout_ms(clock_);
    const int cap = static_cast<int>(test::ms(hb_.period()));
    if (timeout < 0 || timeout > cap) timeout = cap;
    poll(fds, 1 + std::min(n, kMaxWaitFds), timeout);
    if (fds[0].revents & POLLIN) hb_.answer();
    stall.tick(elapsed());
  }
  // Calls into the library, timing the call.
  template <class F>
  auto call(F f) {
    const Steady::time_point start = Steady::now();
    auto r = f();
    max_call_ = std::max<Nanos>(max_call_, Steady::now() - start);
    return r;
  }
  // Steps `op` (anything with wait_fds/next_deadline/step) from status `s`
  // until it is done, for `bound` at most.
  template <class Op>
  Status finish(Op& op, Status s, Nanos bound) {
    for (int i = 0; i < 1000000 && s.code() == ErrorCode::kInProgress && elapsed() < bound; ++i) {
      if (stall.paused) while_paused_ = true;
      pollfd fds[kMaxWaitFds];
      const size_t n = op.wait_fds(fds, kMaxWaitFds);
      turn(fds, n, op.next_deadline());
      s = call([&] { return op.step(); });
    }
    return s;
  }
  // Turns without work of the library until `t` after the start.
  void idle_until(Nanos t) {
    for (int i = 0; i < 1000000 && elapsed() < t; ++i) turn(nullptr, 0, Deadline::never());
  }
  // The heartbeat gap and the longest library call stayed small: a loop
  // that blocked on a paused server would show the whole pause (400 ms and
  // more) in both. The gap's margin (90 ms) absorbs a busy machine's
  // scheduling; the call bound (20 ms) also catches a blocked round trip
  // over the 50 ms links.
  void expect_responsive(const char* what) {
    const Nanos bound = hb_.period() + scaled(Millis(90));
    const Nanos gap = hb_.max_gap();
    std::printf(
        "[ figures  ] %s: max heartbeat gap %lld ms (period %lld ms, %llu beats), "
        "longest library call %.3f ms, paused %lld..%lld ms\n",
        what, static_cast<long long>(test::ms(gap)), static_cast<long long>(test::ms(hb_.period())),
        static_cast<unsigned long long>(hb_.beats()),
        std::chrono::duration<double, std::milli>(max_call_).count(),
        static_cast<long long>(test::ms(stall.from)), static_cast<long long>(test::ms(stall.to)));
    EXPECT_TRUE(stall.over) << "the servers were paused and resumed";
    EXPECT_LE(gap, bound);
    EXPECT_LE(max_call_, scaled(Millis(20)));
  }
  bool op_ran_while_paused() const { return while_paused_; }

  Stall stall;

 private:
  Clock& clock_;
  Heartbeat hb_;
  Steady::time_point t0_;
  Nanos max_call_{0};
  bool while_paused_ = false;
};

// Three servers of its own per test (they get paused); connections with the
// tests' usual 2 s (x slowdown) command timeout unless a test sets one.
class NonblockingLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto& s : servers_) {
      s = std::make_unique<RedisServer>();
      ASSERT_TRUE(s->start());
    }
    ASSERT_TRUE(test::open(admin_, servers_[0]->admin_url()));
  }
  void TearDown() override {
    for (auto& s : servers_) s->resume();
  }
  bool connect(Connection& c, size_t i, Nanos command_timeout) {
    ConnectionOptions o;
    o.connect_timeout = scaled(Millis(2000));
    o.command_timeout = command_timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    return c.init(servers_[i]->url().c_str(), o).ok();
  }

  std::unique_ptr<RedisServer> servers_[3];
  Connection admin_;
};

TEST_F(NonblockingLoopTest, LockAcquireWaitsThroughAPausedServer) {
  Connection c;
  ASSERT_TRUE(connect(c, 0, scaled(Millis(2000))));
  Lock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem")).ok());
  ASSERT_EQ(run(c, {"PING"}), "PONG");
  // Someone else holds it for 300 ms; the server stops for 500 ms of the
  // wait.
  ASSERT_EQ(run(admin_, {"SET", "modem", "other", "PX", std::to_string(300 * test::slowdown())}),
            "OK");
  Loop loop(c.clock());
  loop.stall = Stall::pausing({servers_[0].get()}, scaled(Millis(50)), scaled(Millis(550)));
  const Status s =
      loop.finish(lock, loop.call([&] { return lock.start_acquire(scaled(Millis(3000))); }),
                  scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  EXPECT_TRUE(loop.op_ran_while_paused());
  loop.expect_responsive("Lock acquire");
  EXPECT_TRUE(lock.release().ok());
}

TEST_F(NonblockingLoopTest, SemaphoreAndReentrantAcquireThroughAPausedServer) {
  Connection c;
  ASSERT_TRUE(connect(c, 0, scaled(Millis(2000))));
  Semaphore sem(c);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem")).ok());
  ReentrantLock rl(c);
  ASSERT_TRUE(rl.init(Bytes::from_cstr("rl")).ok());
  ASSERT_EQ(run(c, {"PING"}), "PONG");
  Loop loop(c.clock());
  loop.stall = Stall::pausing({servers_[0].get()}, scaled(Millis(20)), scaled(Millis(420)));
  Permit permit;
  loop.idle_until(scaled(Millis(40)));  // paused from here
  Status s = loop.call([&] { return sem.start_acquire(&permit, scaled(Millis(3000))); });
  s = loop.finish(sem, s, scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << sem.last_error();
  EXPECT_TRUE(loop.op_ran_while_paused());
  loop.stall =
      Stall::pausing({servers_[0].get()}, loop.elapsed(), loop.elapsed() + scaled(Millis(400)));
  loop.idle_until(loop.stall.from + scaled(Millis(20)));
  s = loop.finish(rl, loop.call([&] { return rl.start_acquire(scaled(Millis(3000))); }),
                  loop.elapsed() + scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << rl.last_error();
  loop.expect_responsive("Semaphore + ReentrantLock acquire");
  EXPECT_TRUE(permit.release().ok());
  EXPECT_TRUE(rl.release().ok());
}

TEST_F(NonblockingLoopTest, QuorumAcquireWaitsWhileAMajorityIsPaused) {
  Connection c[3];
  Connection* conns[3];
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(connect(c[i], i, scaled(Millis(2000))));
    ASSERT_EQ(run(c[i], {"PING"}), "PONG");
    conns[i] = &c[i];
  }
  QuorumOptions o;
  o.server_timeout = scaled(Millis(100));
  QuorumLock q;
  ASSERT_TRUE(q.init(conns, 3, Bytes::from_cstr("modem"), o).ok());
  Loop loop(c[0].clock());
  loop.stall =
      Stall::pausing({servers_[1].get(), servers_[2].get()}, Millis(0), scaled(Millis(500)));
  loop.idle_until(scaled(Millis(10)));
  const Status s = loop.finish(q, loop.call([&] { return q.start_acquire(scaled(Millis(3000))); }),
                               scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << q.last_error();
  EXPECT_TRUE(loop.op_ran_while_paused());
  EXPECT_GT(q.fence(), 0u);
  loop.expect_responsive("QuorumLock acquire (2 of 3 paused)");
  EXPECT_TRUE(q.release().ok());
}

// Keeps `keeper` in the loop until `t`; returns when it saw kLost (on the
// lease's clock), or TimePoint() if it did not. `end` follows the validity
// end the loop observed while the lease was kept.
TimePoint keep_until(Loop& loop, LeaseKeeper& keeper, Lease& lease, Nanos t, TimePoint* end,
                     bool* renewed_while_paused) {
  Clock& clock = lease.clock();
  for (int i = 0; i < 1000000 && loop.elapsed() < t; ++i) {
    if (keeper.state() != LeaseState::kKeeping) return clock.now();
    *end = std::max(*end, clock.now() + lease.remaining());
    if (loop.stall.paused && keeper.renewing()) *renewed_while_paused = true;
    pollfd fds[kMaxWaitFds];
    const size_t n = keeper.wait_fds(fds, kMaxWaitFds);
    loop.turn(fds, n, keeper.next_deadline());
    loop.call([&] { return keeper.step(); });
  }
  return keeper.state() == LeaseState::kLost ? clock.now() : TimePoint();
}

TEST_F(NonblockingLoopTest, KeeperRenewsThroughAPauseAndReportsLossOnTime) {
  Connection c;
  // A short command timeout: renewals out during the pause time out and
  // are retried.
  ASSERT_TRUE(connect(c, 0, scaled(Millis(200))));
  Lock lock(c);
  LockOptions lo;
  lo.ttl = std::chrono::floor<Millis>(scaled(Millis(1500)));
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok());
  Loop loop(c.clock());
  // A pause shorter than the validity: kept.
  loop.stall = Stall::pausing({servers_[0].get()}, scaled(Millis(400)), scaled(Millis(1000)));
  TimePoint end{};
  bool overlapped = false;
  EXPECT_EQ(keep_until(loop, keeper, lock, scaled(Millis(2500)), &end, &overlapped), TimePoint());
  EXPECT_TRUE(overlapped) << "a renewal was out while the server was paused";
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping) << keeper.last_status().to_string();
  EXPECT_GE(keeper.stats().renewals, 2u);
  // A pause longer than the validity: lost, reported at its end on the
  // loop's own clock.
  const Nanos from = loop.elapsed();
  loop.stall = Stall::pausing({servers_[0].get()}, from, from + scaled(Millis(2500)));
  const TimePoint seen =
      keep_until(loop, keeper, lock, from + scaled(Millis(2400)), &end, &overlapped);
  ASSERT_NE(seen, TimePoint()) << "lost within the pause";
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
  // One heartbeat period (the loop's poll bound) plus scheduling slack.
  EXPECT_LE(keeper.lost_at() - end, scaled(Millis(50)));
  EXPECT_LE(seen - end, scaled(Millis(50)));
  std::printf("[ figures  ] keeper: loss seen %.1f ms after the validity end\n",
              std::chrono::duration<double, std::milli>(seen - end).count());
  loop.idle_until(loop.stall.to + Millis(1));
  loop.expect_responsive("LeaseKeeper renewals");
}

TEST_F(NonblockingLoopTest, ReleaseWaitsThroughAPausedServer) {
  Connection c;
  ASSERT_TRUE(connect(c, 0, scaled(Millis(2000))));
  Lock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  Loop loop(c.clock());
  loop.stall = Stall::pausing({servers_[0].get()}, Millis(0), scaled(Millis(500)));
  loop.idle_until(scaled(Millis(10)));
  const Status s =
      loop.finish(lock, loop.call([&] { return lock.start_release(); }), scaled(Millis(3000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  EXPECT_TRUE(loop.op_ran_while_paused());
  loop.expect_responsive("Lock release");
  EXPECT_EQ(run(admin_, {"EXISTS", "modem"}), "0");
}

// Every server behind a DelayProxy: the links to two of them become slow
// (300 ms each way, beyond the 150 ms round budget) across a renewal and
// heal; then the release runs over 50 ms links, which a blocking release
// would spend in the loop.
TEST_F(NonblockingLoopTest, QuorumKeeperAndReleaseOverSlowLinks) {
  std::unique_ptr<test::DelayProxy> links[3];
  Connection c[3];
  Connection* conns[3];
  for (size_t i = 0; i < 3; ++i) {
    links[i] = std::make_unique<test::DelayProxy>(servers_[i]->port(), Nanos::zero());
    ASSERT_TRUE(links[i]->start());
    ConnectionOptions o;
    o.connect_timeout = scaled(Millis(2000));
    o.command_timeout = scaled(Millis(2000));
    ASSERT_TRUE(c[i].init(links[i]->url().c_str(), o).ok());
    conns[i] = &c[i];
  }
  QuorumOptions qo;
  qo.ttl = std::chrono::floor<Millis>(scaled(Millis(1500)));
  qo.server_timeout = scaled(Millis(150));
  QuorumLock q;
  ASSERT_TRUE(q.init(conns, 3, Bytes::from_cstr("modem"), qo).ok());
  // Every script cached on every server (a NOSCRIPT costs a round trip).
  ASSERT_TRUE(q.try_acquire().ok()) << q.last_error();
  ASSERT_TRUE(q.renew().ok()) << q.last_error();
  ASSERT_TRUE(q.release().ok()) << q.last_error();
  ASSERT_TRUE(q.try_acquire().ok()) << q.last_error();
  LeaseKeeper keeper(q);
  ASSERT_TRUE(keeper.start().ok());
  Loop loop(c[0].clock());
  loop.stall.links = {links[1].get(), links[2].get()};
  loop.stall.slow = scaled(Millis(300));
  loop.stall.from = scaled(Millis(300));
  loop.stall.to = scaled(Millis(800));
  TimePoint end{};
  bool overlapped = false;
  EXPECT_EQ(keep_until(loop, keeper, q, scaled(Millis(2000)), &end, &overlapped), TimePoint());
  EXPECT_TRUE(overlapped) << "a renewal was out while the links were slow";
  EXPECT_EQ(keeper.state(), LeaseState::kKeeping) << keeper.last_status().to_string();
  EXPECT_GE(keeper.stats().renewals, 2u);
  keeper.stop();
  for (auto& l : links) l->set_delay(scaled(Millis(50)));
  const Status s = loop.finish(q, loop.call([&] { return q.start_release(); }),
                               loop.elapsed() + scaled(Millis(3000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << q.last_error();
  loop.expect_responsive("QuorumLock keeper + release over slow links");
}

// The examples (examples/poll_lease.cc, glib_lease.cc; paths from the
// environment, native builds only) hold a lease for 2 s through a 1 s
// pause of the server and report a tick gap near their 10 ms (under 100 ms).
void run_example(const char* env, RedisServer& server) {
  const char* path = std::getenv(env);
  if (path == nullptr || *path == '\0') GTEST_SKIP() << env << " not set (example not built)";
  const std::string log = server.dir() + "/" + env + ".log";
  std::thread staller([&server] {
    std::this_thread::sleep_for(Millis(700));
    server.pause();
    std::this_thread::sleep_for(Millis(1000));
    server.resume();
  });
  const int rc = test::run_program({path, server.url(), "2"}, log, 10000);
  staller.join();
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(rc, 0) << text.str();
  const std::string out = text.str();
  const size_t at = out.find("longest tick gap ");
  ASSERT_NE(out.find("released: ok"), std::string::npos) << out;
  ASSERT_NE(at, std::string::npos) << out;
  const double gap = std::atof(out.c_str() + at + 17);
  std::printf("[ figures  ] %s: %s", env, out.substr(out.rfind("released")).c_str());
  EXPECT_GT(gap, 5.0);
  EXPECT_LT(gap, 100.0);  // a blocked loop would show the 1 s pause
}

TEST_F(NonblockingLoopTest, PollExampleHoldsThroughAPause) {
  run_example("EDGELOCK_POLL_LEASE", *servers_[0]);
}

TEST_F(NonblockingLoopTest, GlibExampleHoldsThroughAPause) {
  run_example("EDGELOCK_GLIB_LEASE", *servers_[0]);
}

}  // namespace
}  // namespace edgelock
