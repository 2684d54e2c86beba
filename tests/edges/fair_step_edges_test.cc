// FairLock's non-blocking face against a real redis-server: the join, the
// wait on the wake list, the hand-over and leaving the queue are steps of
// one poll() loop, none of which blocks; the order stays first come, first
// served; a stopped server costs the acquire its deadline, not the loop;
// a cancelled waiter does not hold the queue up.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <string>

#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;
using Steady = std::chrono::steady_clock;

constexpr int kMaxLocks = 3;
Nanos slow(Nanos t) { return t * test::slowdown(); }

// The longest one step() may take: it only moves bytes already there.
const Nanos kStepBound = slow(Millis(20));

// Drives the handles given from one poll() loop until `done` says so or
// the time runs out, counting step() calls and timing each.
struct Loop {
  FairLock* locks[kMaxLocks] = {};
  Status last[kMaxLocks];
  int n = 0;
  int steps = 0;
  Nanos longest{0};

  void add(FairLock* l, Status s) {
    locks[n] = l;
    last[n++] = s;
  }
  // One turn: poll every handle in flight until the earliest deadline (at
  // most 50 ms), then step each of them once.
  void turn() {
    pollfd fds[kMaxLocks * kMaxWaitFds];
    size_t nfds = 0;
    int timeout = 50;
    for (int i = 0; i < n; ++i) {
      if (!locks[i]->in_progress()) continue;
      nfds += locks[i]->wait_fds(fds + nfds, kMaxWaitFds);
      const int t = locks[i]->next_deadline().poll_timeout_ms(locks[i]->clock());
      if (t >= 0 && t < timeout) timeout = t;
    }
    poll(fds, nfds, timeout);
    for (int i = 0; i < n; ++i) {
      if (!locks[i]->in_progress()) continue;
      const auto t0 = Steady::now();
      last[i] = locks[i]->step();
      const Nanos took = Steady::now() - t0;
      if (took > longest) longest = took;
      ++steps;
    }
  }
  // Turns until `done()` or `limit`; false on running out of time.
  template <class Done>
  bool until(Done done, Nanos limit) {
    const auto end = Steady::now() + limit;
    for (int i = 0; i < 100000 && !done(); ++i) {
      if (Steady::now() > end) return false;
      turn();
    }
    return done();
  }
};

class FairStepEdges : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    for (Connection& c : conns_) ASSERT_TRUE(test::open(c, server_->url()));
    ASSERT_TRUE(test::open(admin_, server_->admin_url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
  }

  static FairLockOptions opts(Millis waiter_timeout = Millis(2000)) {
    FairLockOptions o;
    o.ttl = Millis(10000);
    o.waiter_timeout = waiter_timeout * test::slowdown();
    return o;
  }

  std::string queue_entry(FairLock& l) {
    const Bytes t = l.token();
    return run(admin_, {"HEXISTS", "{fse}:queue",
                        "w:" + std::string(reinterpret_cast<const char*>(t.data), t.size)});
  }

  Connection conns_[kMaxLocks];
  Connection admin_;
};

TEST_F(FairStepEdges, FreeKeyInAFewSteps) {
  FairLock l(conns_[0]);
  ASSERT_TRUE(l.init(Bytes::from_cstr("fse"), opts()).ok());
  ASSERT_TRUE(l.nonblocking());
  Loop loop;
  const Status s = l.start_acquire(slow(Millis(1000)));
  ASSERT_EQ(s.code(), ErrorCode::kInProgress);
  EXPECT_TRUE(l.in_progress());
  loop.add(&l, s);
  ASSERT_TRUE(loop.until([&] { return !l.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(loop.last[0].ok()) << loop.last[0].to_string();
  EXPECT_TRUE(l.held());
  EXPECT_GE(l.fence(), 1u);
  EXPECT_LE(loop.steps, 10);
  EXPECT_LT(loop.longest, kStepBound);
  EXPECT_EQ(l.step().code(), ErrorCode::kInvalidArgument);  // nothing in flight
  // The rest of the face, stepped: renew, extend, release.
  Status r = l.start_renew();
  for (int i = 0; i < 1000 && r.code() == ErrorCode::kInProgress; ++i) {
    pollfd fd[kMaxWaitFds];
    poll(fd, l.wait_fds(fd, kMaxWaitFds), 50);
    r = l.step();
  }
  EXPECT_TRUE(r.ok()) << r.to_string();
  Loop rel;
  rel.add(&l, l.start_release());
  ASSERT_TRUE(rel.until([&] { return !l.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(rel.last[0].ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "fse"}), "0");
}

// Holder H, then waiters W1 and W2 queued in that order, each on its own
// connection, all stepped from one loop: H's release goes to W1, W1's to
// W2, and no step() blocks.
TEST_F(FairStepEdges, FifoHandOverFromOneLoop) {
  FairLock h(conns_[0]), w1(conns_[1]), w2(conns_[2]);
  for (FairLock* l : {&h, &w1, &w2}) ASSERT_TRUE(l->init(Bytes::from_cstr("fse"), opts()).ok());
  ASSERT_TRUE(h.try_acquire().ok());
  Loop loop;
  loop.add(&w1, w1.start_acquire(slow(Millis(8000))));
  ASSERT_EQ(loop.last[0].code(), ErrorCode::kInProgress);
  ASSERT_TRUE(loop.until([&] { return w1.queue_position() == 1; }, slow(Millis(3000))));
  loop.add(&w2, w2.start_acquire(slow(Millis(8000))));
  ASSERT_EQ(loop.last[1].code(), ErrorCode::kInProgress);
  ASSERT_TRUE(loop.until([&] { return w2.queue_position() == 2; }, slow(Millis(3000))));
  EXPECT_TRUE(w1.in_progress() && w2.in_progress());
  const int queued_steps = loop.steps;

  loop.add(&h, h.start_release());
  const auto released = Steady::now();
  ASSERT_TRUE(
      loop.until([&] { return !w1.in_progress() || !w2.in_progress(); }, slow(Millis(5000))));
  const Nanos handoff = Steady::now() - released;
  ASSERT_FALSE(w1.in_progress()) << "W2 got it before W1";
  ASSERT_TRUE(loop.last[0].ok()) << loop.last[0].to_string();
  EXPECT_TRUE(w1.held());
  EXPECT_TRUE(w2.in_progress());
  EXPECT_FALSE(w2.held());

  // W1 lets go from the same loop: W2 is next.
  ASSERT_TRUE(loop.until([&] { return !h.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(loop.last[2].ok()) << loop.last[2].to_string();
  loop.last[0] = w1.start_release();  // W1 is the loop's first handle
  ASSERT_TRUE(
      loop.until([&] { return !w2.in_progress() && !w1.in_progress(); }, slow(Millis(5000))));
  EXPECT_TRUE(loop.last[0].ok()) << loop.last[0].to_string();
  EXPECT_TRUE(loop.last[1].ok()) << loop.last[1].to_string();
  EXPECT_TRUE(w2.held());
  EXPECT_GT(w2.fence(), w1.fence());
  // Each waiter blocked on its wake list: a few steps per request, no
  // spinning while queued.
  EXPECT_LT(loop.steps, 120) << "queued in " << queued_steps;
  EXPECT_LT(loop.longest, kStepBound);
  EXPECT_LT(handoff, slow(Millis(500)));
  std::printf("fifo hand-over: %d steps, longest step %.3f ms, H->W1 %.3f ms\n", loop.steps,
              std::chrono::duration<double, std::milli>(loop.longest).count(),
              std::chrono::duration<double, std::milli>(handoff).count());
  ASSERT_TRUE(w2.release().ok());
}

// A stopped server: no step() waits for it, and the acquire ends within
// its wait plus one command timeout.
TEST_F(FairStepEdges, StoppedServerNeverBlocksAStep) {
  ConnectionOptions o;
  o.connect_timeout = slow(Millis(200));
  o.command_timeout = slow(Millis(200));
  o.reconnect_min = Millis(1);
  o.reconnect_max = Millis(10);
  Connection c;
  ASSERT_TRUE(c.init(server_->url().c_str(), o).ok());
  FairLock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("fse"), opts()).ok());
  ASSERT_TRUE(l.try_acquire().ok());  // connected, scripts cached
  ASSERT_TRUE(l.release().ok());
  const Nanos wait = slow(Millis(300));
  server_->pause();
  Loop loop;
  const auto t0 = Steady::now();
  loop.add(&l, l.start_acquire(wait));
  const bool ended = loop.until([&] { return !l.in_progress(); }, slow(Millis(3000)));
  const Nanos took = Steady::now() - t0;
  server_->resume();
  ASSERT_TRUE(ended);
  EXPECT_FALSE(loop.last[0].ok());
  EXPECT_FALSE(l.held());
  EXPECT_LT(loop.longest, kStepBound);
  EXPECT_LT(took, wait + o.command_timeout + slow(Millis(150)));
  EXPECT_LT(loop.steps, 2000);
  std::printf("stopped server: %s after %.1f ms, %d steps, longest step %.3f ms\n",
              loop.last[0].to_string(), std::chrono::duration<double, std::milli>(took).count(),
              loop.steps, std::chrono::duration<double, std::milli>(loop.longest).count());
  // The lost attempt may have landed: release() cleans up; then it works.
  l.release().ignore();
  EXPECT_TRUE(l.acquire(slow(Millis(2000))).ok()) << l.last_error();
}

// cancel() while queued: nothing more is sent; release() then gives the
// place up at once, and the next waiter gets the lock at H's release.
TEST_F(FairStepEdges, CancelWhileQueuedThenReleaseLeaves) {
  FairLock h(conns_[0]), w1(conns_[1]), w2(conns_[2]);
  for (FairLock* l : {&h, &w1, &w2}) ASSERT_TRUE(l->init(Bytes::from_cstr("fse"), opts()).ok());
  ASSERT_TRUE(h.try_acquire().ok());
  Loop loop;
  loop.add(&w1, w1.start_acquire(slow(Millis(8000))));
  ASSERT_TRUE(loop.until([&] { return w1.queue_position() == 1; }, slow(Millis(3000))));
  loop.add(&w2, w2.start_acquire(slow(Millis(8000))));
  ASSERT_TRUE(loop.until([&] { return w2.queue_position() == 2; }, slow(Millis(3000))));
  EXPECT_EQ(queue_entry(w1), "1");
  w1.cancel();
  EXPECT_FALSE(w1.in_progress());
  EXPECT_FALSE(w1.held());
  EXPECT_EQ(w1.step().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(queue_entry(w1), "1") << "cancel() sends nothing";
  const Status r = w1.release();  // the token was kept: the place goes
  EXPECT_EQ(r.code(), ErrorCode::kNotOwner) << r.to_string();
  EXPECT_EQ(queue_entry(w1), "0");
  loop.add(&h, h.start_release());
  const auto released = Steady::now();
  ASSERT_TRUE(loop.until([&] { return !w2.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(loop.last[1].ok()) << loop.last[1].to_string();
  EXPECT_TRUE(w2.held());
  EXPECT_LT(Steady::now() - released, slow(Millis(500)));
  EXPECT_LT(loop.longest, kStepBound);
  ASSERT_TRUE(w2.release().ok());
}

// cancel() while queued and nothing else: the place lapses, so the next
// waiter is held up at most one waiter_timeout after the last attempt.
TEST_F(FairStepEdges, CancelledWaiterLapsesWithinWaiterTimeout) {
  const FairLockOptions o = opts(Millis(1000));
  FairLock h(conns_[0]), w1(conns_[1]), w2(conns_[2]);
  for (FairLock* l : {&h, &w1, &w2}) ASSERT_TRUE(l->init(Bytes::from_cstr("fse"), o).ok());
  ASSERT_TRUE(h.try_acquire().ok());
  Loop loop;
  loop.add(&w1, w1.start_acquire(slow(Millis(8000))));
  ASSERT_TRUE(loop.until([&] { return w1.queue_position() == 1; }, slow(Millis(3000))));
  loop.add(&w2, w2.start_acquire(slow(Millis(8000))));
  ASSERT_TRUE(loop.until([&] { return w2.queue_position() == 2; }, slow(Millis(3000))));
  const auto cancelled = Steady::now();
  w1.cancel();
  loop.add(&h, h.start_release());
  ASSERT_TRUE(loop.until([&] { return !w2.in_progress(); }, slow(Millis(5000))));
  const Nanos held_up = Steady::now() - cancelled;
  EXPECT_TRUE(loop.last[1].ok()) << loop.last[1].to_string();
  EXPECT_TRUE(w2.held());
  EXPECT_LT(held_up, Nanos(o.waiter_timeout) + slow(Millis(300)));
  EXPECT_LT(loop.longest, kStepBound);
  EXPECT_LT(loop.steps, 200 * test::slowdown());  // the wait is scaled, and so its retries
  std::printf("cancelled waiter: next one granted after %.1f ms (waiter_timeout %lld ms)\n",
              std::chrono::duration<double, std::milli>(held_up).count(),
              static_cast<long long>(o.waiter_timeout.count()));
  ASSERT_TRUE(w2.release().ok());
  w1.release().ignore();
}

// On a connection other handles share, a waiter polls its turn with
// backoff pauses instead of holding the connection with a BLPOP: the
// holder's release on that same connection is not held up behind it.
TEST_F(FairStepEdges, SharedConnectionWaiterDoesNotBlpop) {
  FairLock h(conns_[0]), w(conns_[0]);
  for (FairLock* l : {&h, &w}) ASSERT_TRUE(l->init(Bytes::from_cstr("fse"), opts()).ok());
  ASSERT_TRUE(h.try_acquire().ok());
  Loop loop;
  loop.add(&w, w.start_acquire(slow(Millis(5000))));
  ASSERT_TRUE(loop.until([&] { return w.queue_position() == 1; }, slow(Millis(3000))));
  // Let it wait a while: no BLPOP means the connection is free between
  // its attempts.
  (void)loop.until([] { return false; }, slow(Millis(300)));
  const auto t0 = Steady::now();
  loop.add(&h, h.start_release());
  ASSERT_TRUE(loop.until([&] { return !h.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(loop.last[1].ok()) << loop.last[1].to_string();
  EXPECT_LT(Steady::now() - t0, slow(Millis(300)));
  ASSERT_TRUE(loop.until([&] { return !w.in_progress(); }, slow(Millis(3000))));
  EXPECT_TRUE(loop.last[0].ok()) << loop.last[0].to_string();
  EXPECT_LT(loop.longest, kStepBound);
  ASSERT_TRUE(w.release().ok());
}

}  // namespace
}  // namespace edgelock
