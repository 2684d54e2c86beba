// RateLimiter's non-blocking face in a caller's poll() loop, with limit 1
// and M: admitted, refused and then admitted after the server's wait
// (a pause of the machine, never a sleep in step()), ending as kTimeout
// against a SIGSTOPped server, and cancel() in the middle of a pause. Each
// test bounds the longest step() and the number of steps (no spinning)
// and prints them.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using Steady = std::chrono::steady_clock;

Nanos scaled(Nanos d) { return d * test::slowdown(); }

// The caller's loop: poll the operation's descriptors until its next
// deadline (at most 100 ms a turn), then step it; times every step.
struct Driver {
  int steps = 0;
  Nanos longest{0};
  Nanos took{0};

  template <class Op>
  Status finish(Op& op, Status s, Nanos bound) {
    const Steady::time_point t0 = Steady::now();
    Clock& clock = default_clock();  // every connection here runs on it
    for (int i = 0; i < 10000 && s.code() == ErrorCode::kInProgress; ++i) {
      if (Steady::now() - t0 > bound) break;
      pollfd fds[kMaxWaitFds];
      const size_t n = op.wait_fds(fds, kMaxWaitFds);
      int timeout = op.next_deadline().poll_timeout_ms(clock);
      if (timeout < 0 || timeout > 100) timeout = 100;
      poll(fds, n, timeout);
      const Steady::time_point start = Steady::now();
      s = op.step();
      longest = std::max<Nanos>(longest, Steady::now() - start);
      ++steps;
    }
    took = Steady::now() - t0;
    return s;
  }
  void print(const char* what) const {
    std::printf("[ figures  ] %s: %d steps in %lld ms, longest step %.3f ms\n", what, steps,
                static_cast<long long>(test::ms(took)),
                std::chrono::duration<double, std::milli>(longest).count());
  }
};

class NonblockingRateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.start());
    ASSERT_TRUE(connect(c_, scaled(Millis(2000))));
    ASSERT_TRUE(connect(peer_, scaled(Millis(2000))));
    ASSERT_EQ(test::run(c_, {"PING"}), "PONG");
  }
  void TearDown() override { server_.resume(); }
  bool connect(Connection& c, Nanos command_timeout) {
    ConnectionOptions o;
    o.connect_timeout = scaled(Millis(2000));
    o.command_timeout = command_timeout;
    return c.init(server_.url().c_str(), o).ok();
  }

  test::RedisServer server_;
  Connection c_, peer_;
};

TEST_F(NonblockingRateTest, Admitted) {
  RateLimiter cd(c_);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("nb-cd")).ok());
  RateLimiter q(c_);
  RateLimiterOptions qo;
  qo.limit = 3;
  ASSERT_TRUE(q.init(Bytes::from_cstr("nb-q"), qo).ok());
  Admission a;
  Driver d;
  Status s = cd.start_acquire(Nanos::zero(), &a);
  EXPECT_EQ(s.code(), ErrorCode::kInProgress) << "the request is out, not answered in the call";
  EXPECT_EQ(cd.step().code(), ErrorCode::kInProgress);  // the reply is a round trip away at least
  s = d.finish(cd, s, scaled(Millis(2000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << cd.last_error();
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(cd.step().code(), ErrorCode::kInvalidArgument) << "nothing in flight";
  s = d.finish(q, q.start_acquire(Nanos::zero(), &a), scaled(Millis(2000)));
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 2);
  // The local hint refuses without a request: the final status at once.
  EXPECT_EQ(cd.start_acquire(Nanos::zero(), &a).code(), ErrorCode::kBusy);
  EXPECT_TRUE(a.local);
  d.print("limit 1 + limit 3 admitted");
  EXPECT_LE(d.steps, 10);
  EXPECT_LE(d.longest, scaled(Millis(20)));
}

TEST_F(NonblockingRateTest, RefusedThenAdmittedAfterTheWindow) {
  const Millis window = std::chrono::floor<Millis>(scaled(Millis(300)));
  RateLimiterOptions co;
  co.window = window;
  RateLimiter cd(c_), other(peer_);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("nb-cd"), co).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("nb-cd"), co).ok());
  ASSERT_TRUE(other.try_acquire().ok());
  Admission a;
  Driver d;
  Status s = d.finish(cd, cd.start_acquire(scaled(Millis(3000)), &a), scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << cd.last_error();
  EXPECT_TRUE(a.allowed);
  // Refused first (counted), then admitted once the other's window ended;
  // cd alone uses c_, so c_'s counters are cd's.
  EXPECT_GE(c_.metrics().busy, 1u);
  EXPECT_EQ(c_.metrics().grants, 1u);
  EXPECT_GE(d.took, window - Millis(50));
  d.print("limit 1 refused, then admitted");
  // The driver wakes at least every 100 ms on its own: a pause is one
  // deadline, not a spin.
  EXPECT_LE(d.steps, 20 + test::ms(d.took) / 100) << "a spin";
  EXPECT_LE(d.longest, scaled(Millis(20)));

  RateLimiterOptions qo;
  qo.limit = 2;
  qo.window = window;
  RateLimiter q(c_), others(peer_);
  ASSERT_TRUE(q.init(Bytes::from_cstr("nb-q"), qo).ok());
  ASSERT_TRUE(others.init(Bytes::from_cstr("nb-q"), qo).ok());
  ASSERT_TRUE(others.try_acquire().ok());
  ASSERT_TRUE(others.try_acquire().ok());
  Driver dq;
  s = dq.finish(q, q.start_acquire(scaled(Millis(3000)), &a), scaled(Millis(5000)));
  EXPECT_TRUE(s.ok()) << s.to_string() << " " << q.last_error();
  EXPECT_EQ(a.remaining, 1) << "a fresh window";
  EXPECT_GE(dq.took, window - Millis(50));
  dq.print("limit 2 used up, then admitted");
  EXPECT_LE(dq.steps, 20 + test::ms(dq.took) / 100);
  EXPECT_LE(dq.longest, scaled(Millis(20)));
}

TEST_F(NonblockingRateTest, PausedServerEndsAsTimeoutWithoutBlockingAStep) {
  const Nanos timeout = scaled(Millis(300));
  Connection c;
  ASSERT_TRUE(connect(c, timeout));
  RateLimiter cd(c);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("nb-cd")).ok());
  RateLimiter q(c);
  ASSERT_TRUE(q.init(Bytes::from_cstr("nb-q")).ok());
  // Scripts cached: a NOSCRIPT would cost another round trip.
  ASSERT_TRUE(cd.try_acquire().ok());
  ASSERT_TRUE(cd.erase_on_server().ok());
  ASSERT_TRUE(q.try_acquire().ok());
  ASSERT_TRUE(q.erase_on_server().ok());
  server_.pause();
  Driver d;
  Status s = d.finish(cd, cd.start_acquire(scaled(Millis(5000))), scaled(Millis(5000)));
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_GE(d.took, timeout - Millis(20));
  EXPECT_LE(d.took, timeout + scaled(Millis(100))) << "ends at the request's deadline";
  d.print("limit 1 against a paused server");
  // The second limiter reconnects (the kernel still accepts) within its steps.
  Driver dq;
  s = dq.finish(q, q.start_acquire(scaled(Millis(5000))), scaled(Millis(5000)));
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_LE(dq.took, 2 * timeout + scaled(Millis(100)));
  dq.print("the second limiter against a paused server");
  for (const Driver* x : {&d, &dq}) {
    EXPECT_LE(x->steps, 20 + test::ms(x->took) / 100);  // the driver wakes every 100 ms
    EXPECT_LE(x->longest, scaled(Millis(20)));
  }
  server_.resume();
  EXPECT_TRUE(cd.peek().ok()) << "usable again after the server is back";
}

// Steps `op` until it is pausing (no request out), for 100 steps at most.
template <class Op>
Status until_pausing(Op& op, Status s) {
  for (int i = 0; i < 100 && s.code() == ErrorCode::kInProgress; ++i) {
    pollfd fds[kMaxWaitFds];
    if (op.wait_fds(fds, kMaxWaitFds) == 0) break;
    poll(fds, 1, 100);
    s = op.step();
  }
  return s;
}

TEST_F(NonblockingRateTest, CancelMidPause) {
  RateLimiterOptions co;
  co.window = Millis(60000);
  co.local_hint = false;  // the refusal comes from the server
  RateLimiter cd(c_), other(peer_);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("nb-cd"), co).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("nb-cd"), co).ok());
  ASSERT_TRUE(other.try_acquire().ok());
  Admission a;
  Clock& clock = c_.clock();
  Status s = until_pausing(cd, cd.start_acquire(Millis(30000), &a));
  ASSERT_EQ(s.code(), ErrorCode::kInProgress) << s.to_string();
  EXPECT_FALSE(a.allowed);
  EXPECT_GT(a.retry_after, Millis(50000)) << "pausing what the server said";
  EXPECT_GT(cd.next_deadline().remaining(clock), Millis(1000));
  const Steady::time_point t0 = Steady::now();
  cd.cancel();
  EXPECT_LE(Steady::now() - t0, Millis(50) * test::slowdown()) << "cancel() never waits";
  EXPECT_EQ(cd.step().code(), ErrorCode::kInvalidArgument) << "nothing in flight";
  EXPECT_TRUE(cd.next_deadline().is_never());
  EXPECT_EQ(cd.erase_on_server().code(), ErrorCode::kOk) << "the handle is free again";

  // A limiter pausing on its local hint, cancelled; then one cancelled with
  // its request out, which closes the connection: the next one reconnects.
  RateLimiterOptions qo;
  qo.window = Millis(60000);
  RateLimiter q(c_);
  ASSERT_TRUE(q.init(Bytes::from_cstr("nb-q"), qo).ok());
  ASSERT_TRUE(q.try_acquire().ok());
  s = q.start_acquire(Millis(30000), &a);
  ASSERT_EQ(s.code(), ErrorCode::kInProgress);
  EXPECT_TRUE(a.local);
  q.cancel();
  EXPECT_EQ(q.step().code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(q.erase_on_server().ok());
  ASSERT_EQ(q.start_acquire(Nanos::zero()).code(), ErrorCode::kInProgress);
  q.cancel();
  EXPECT_EQ(q.step().code(), ErrorCode::kInvalidArgument);
  Driver d;
  s = d.finish(q, q.start_acquire(Nanos::zero(), &a), scaled(Millis(3000)));
  EXPECT_TRUE(s.code() == ErrorCode::kOk || s.code() == ErrorCode::kBusy) << s.to_string();
}

}  // namespace
}  // namespace edgelock
