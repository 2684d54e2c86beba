// Several handles on one Connection, driven from one poll() loop against
// a real redis-server: a keeper keeps its lease while a neighbour waits, a
// release or an ownership check during a neighbour's wait is answered at
// once (and a check's steps never wait on the server), handles take
// their turns in order, and a full queue or a turn that never comes is
// refused with kConnectionBusy and a text that says why.
#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../support/shared_server_test.h"
#include "../support/step_loop.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace edgelock {
namespace {

using Steady = std::chrono::steady_clock;
using test::run;

Nanos scaled(Nanos d) { return d * test::slowdown(); }

// One turn of the caller's loop: poll what `leases` wait on until the
// earliest of their deadlines (at most `cap`).
void wait_turn(Clock& clock, std::initializer_list<const Lease*> leases, const LeaseKeeper* keeper,
               Nanos cap) {
  pollfd fds[4] = {};
  size_t n = 0;
  Deadline d = Deadline::after(clock, cap);
  for (const Lease* l : leases) {
    n += l->wait_fds(fds + n, 4 - n);
    d = d.min(l->next_deadline());
  }
  if (keeper) {
    n += keeper->wait_fds(fds + n, 4 - n);
    d = d.min(keeper->next_deadline());
  }
  // Rounded up: a poll that wakes before the deadline would only spin.
  const auto ms = std::chrono::ceil<Millis>(d.remaining(clock)).count();
  (void)::poll(fds, static_cast<nfds_t>(n), static_cast<int>(ms));
}

class SharedConnection : public test::SharedServerTest {
 protected:
  // `a` holds "sc:a" while `b`, on the same connection, has waited 200 ms
  // for "sc:b" (held by another client).
  void hold_beside_a_waiter(Lock& a, Lock& b) {
    ASSERT_EQ(run(b_, {"SET", "sc:b", "other", "PX", "60000"}), "OK");
    ASSERT_TRUE(a.init(Bytes::from_cstr("sc:a"), LockOptions{Millis(30000)}).ok());
    ASSERT_TRUE(b.init(Bytes::from_cstr("sc:b"), LockOptions{Millis(30000)}).ok());
    ASSERT_TRUE(a.try_acquire().ok());
    ASSERT_EQ(b.start_acquire(scaled(Millis(3000))).code(), ErrorCode::kInProgress);
    const Steady::time_point settle = Steady::now() + Millis(200);
    for (int i = 0; i < 10000 && Steady::now() < settle; ++i) {
      wait_turn(a_.clock(), {&b}, nullptr, Millis(20));
      ASSERT_EQ(b.step().code(), ErrorCode::kInProgress);
    }
  }
  // Steps a's operation `s` to its end while b goes on waiting.
  Status step_beside_a_waiter(Lock& a, Lock& b, Status s) {
    for (int i = 0; i < 10000 && s.code() == ErrorCode::kInProgress; ++i) {
      wait_turn(a_.clock(), {&a, &b}, nullptr, Millis(20));
      s = a.step();
      EXPECT_EQ(b.step().code(), ErrorCode::kInProgress);
    }
    return s;
  }
};

// A keeper on A and a waiting acquire of B on the same connection: B's
// wait must never hold the connection for longer than one request, so
// every renewal of A goes through.
TEST_F(SharedConnection, KeeperKeepsItsLeaseWhileANeighbourWaits) {
  ASSERT_EQ(run(b_, {"SET", "sc:b", "other", "PX", "60000"}), "OK");
  Lock a(a_), b(a_);
  const Millis ttl = std::chrono::duration_cast<Millis>(scaled(Millis(3000)));
  ASSERT_TRUE(a.init(Bytes::from_cstr("sc:a"), LockOptions{ttl}).ok());
  ASSERT_TRUE(b.init(Bytes::from_cstr("sc:b"), LockOptions{ttl}).ok());
  ASSERT_TRUE(a.try_acquire().ok());
  KeeperOptions ko;
  ko.renew_every = scaled(Millis(200));
  LeaseKeeper keeper(a, ko);
  const Status started = keeper.start();
  ASSERT_TRUE(started.ok()) << started.to_string() << ": " << a.last_error();
  ASSERT_EQ(b.start_acquire(scaled(Millis(2000))).code(), ErrorCode::kInProgress);
  Status b_end = ErrorCode::kInProgress;
  Nanos longest{0};
  const Steady::time_point end = Steady::now() + scaled(Millis(2500));
  for (int i = 0; i < 100000 && Steady::now() < end; ++i) {
    wait_turn(a_.clock(), {&b}, &keeper, Millis(50));
    const Steady::time_point t0 = Steady::now();
    ASSERT_EQ(keeper.step(), LeaseState::kKeeping) << keeper.loss_text();
    if (b_end.code() == ErrorCode::kInProgress) b_end = b.step();
    longest = std::max<Nanos>(longest, Steady::now() - t0);
  }
  std::printf("renewals %u, failures %u, longest service+step %.2f ms\n", keeper.stats().renewals,
              keeper.stats().failures, longest.count() / 1e6);
  EXPECT_EQ(keeper.stats().failures, 0u);
  EXPECT_GE(keeper.stats().renewals, 4u);
  EXPECT_EQ(b_end.code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_FALSE(b.held());
  keeper.stop();
  EXPECT_TRUE(a.release().ok()) << a.last_error();
}

// A release started while the other handle's acquire waits on the shared
// connection deletes the key within a round trip or two, not at its TTL.
TEST_F(SharedConnection, ReleaseDuringANeighboursWaitFreesTheKeyAtOnce) {
  Lock a(a_), b(a_);
  ASSERT_NO_FATAL_FAILURE(hold_beside_a_waiter(a, b));
  const Steady::time_point t0 = Steady::now();
  Status a_end = step_beside_a_waiter(a, b, a.start_release());
  const double ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  std::printf("release took %.2f ms\n", ms);
  EXPECT_TRUE(a_end.ok()) << a_end.to_string() << ": " << a.last_error();
  EXPECT_FALSE(a.held());
  EXPECT_EQ(run(admin_, {"EXISTS", "sc:a"}), "0");
  EXPECT_LT(ms, scaled(Millis(300)).count() / 1e6);
  b.cancel();
}

// Drives `l` from the loop until its operation ends; the longest step
// goes to *longest.
Status steps_to_end(Connection& conn, Lock& l, Status s, std::initializer_list<const Lease*> also,
                    Nanos* longest) {
  for (int i = 0; i < 10000 && s.code() == ErrorCode::kInProgress; ++i) {
    wait_turn(conn.clock(), also, nullptr, Millis(20));
    const Steady::time_point t0 = Steady::now();
    s = l.step();
    *longest = std::max<Nanos>(*longest, Steady::now() - t0);
  }
  return s;
}

// An ownership check started while the other handle's acquire waits on the
// shared connection takes its turn and answers within a round trip or two;
// once the key is gone, the next check ends in kNotOwner and drops the
// lease (counted as lost).
TEST_F(SharedConnection, AnOwnershipCheckDuringANeighboursWaitAnswersAtOnce) {
  Lock a(a_), b(a_);
  ASSERT_NO_FATAL_FAILURE(hold_beside_a_waiter(a, b));
  const Steady::time_point t0 = Steady::now();
  Status a_end = step_beside_a_waiter(a, b, a.start_owned());
  const double ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  std::printf("check took %.2f ms\n", ms);
  EXPECT_TRUE(a_end.ok()) << a_end.to_string() << ": " << a.last_error();
  EXPECT_TRUE(a.held());
  EXPECT_LT(ms, scaled(Millis(300)).count() / 1e6);

  const uint32_t lost = a_.metrics().lost_leases;
  ASSERT_EQ(run(admin_, {"DEL", "sc:a"}), "1");
  a_end = step_beside_a_waiter(a, b, a.start_owned());
  EXPECT_EQ(a_end.code(), ErrorCode::kNotOwner) << a_end.to_string();
  EXPECT_FALSE(a.held());
  EXPECT_EQ(a_.metrics().lost_leases, lost + 1);
  EXPECT_EQ(a.start_owned().code(), ErrorCode::kNotHeld);
  b.cancel();
}

// A check's steps never wait on the server: while it holds every client
// (CLIENT PAUSE), each step returns at once, and the check answers after.
TEST_F(SharedConnection, AnOwnershipCheckNeverBlocksTheLoop) {
  Lock a(a_);
  ASSERT_TRUE(a.init(Bytes::from_cstr("sc:a"), LockOptions{Millis(30000)}).ok());
  ASSERT_TRUE(a.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"CLIENT", "PAUSE", "300", "ALL"}), "OK");
  Nanos longest{0};
  const Steady::time_point t0 = Steady::now();
  const Status s = steps_to_end(a_, a, a.start_owned(), {&a}, &longest);
  const double ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  std::printf("check took %.2f ms, longest step %.3f ms\n", ms, longest.count() / 1e6);
  EXPECT_TRUE(s.ok()) << s.to_string() << ": " << a.last_error();
  EXPECT_GE(ms, 250.0);  // it did wait out the pause, in the loop
  EXPECT_LT(longest, scaled(Millis(20)));
  EXPECT_TRUE(a.release().ok()) << a.last_error();
}

// Adds what `op` waits on to fds[*n] and `d`, if its operation goes on.
template <class Op>
void add_wait(const Op& op, Status s, pollfd* fds, size_t* n, Deadline* d) {
  if (s.code() != ErrorCode::kInProgress) return;
  *n += op.wait_fds(fds + *n, 4 - *n);
  *d = d->min(op.next_deadline());
}

// Steps `op` if its operation goes on; the step's time goes to *longest.
template <class Op>
void step_timed(Op& op, Status* s, Nanos* longest) {
  if (s->code() != ErrorCode::kInProgress) return;
  const Steady::time_point t0 = Steady::now();
  *s = op.step();
  *longest = std::max<Nanos>(*longest, Steady::now() - t0);
}

// Queries take their turns on a shared connection and never wait on the
// server in a step: a lock's status, a semaphore's count and a limiter's
// peek, started together while the server holds every client (CLIENT
// PAUSE), each answer after the pause, correctly, with every step short.
// The limiter's erase then deletes its key.
TEST_F(SharedConnection, QueriesTakeTurnsAndNeverBlockTheLoop) {
  Lock lock(a_);
  Semaphore sem(a_);
  RateLimiter limiter(a_);
  RateLimiterOptions ro;
  ro.limit = 5;
  ASSERT_TRUE(lock.init(Bytes::from_cstr("sc:a"), LockOptions{Millis(30000)}).ok());
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sc:s")).ok());
  ASSERT_TRUE(limiter.init(Bytes::from_cstr("sc:r"), ro).ok());
  Permit permit;
  ASSERT_TRUE(lock.try_acquire().ok() && sem.try_acquire(&permit).ok());
  ASSERT_TRUE(limiter.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"CLIENT", "PAUSE", "300", "ALL"}), "OK");
  KeyStatus ks;
  uint32_t used = 9;
  Admission left;
  Status s[3] = {lock.start_status(&ks), sem.start_in_use(&used), limiter.start_peek(&left)};
  Nanos longest{0};
  const Steady::time_point t0 = Steady::now();
  for (int i = 0; i < 10000 && Steady::now() - t0 < Millis(5000); ++i) {
    pollfd fds[4] = {};
    size_t n = 0;
    Deadline d = Deadline::after(a_.clock(), Millis(20));
    add_wait(lock, s[0], fds, &n, &d);
    add_wait(sem, s[1], fds, &n, &d);
    add_wait(limiter, s[2], fds, &n, &d);
    const auto ms = std::chrono::ceil<Millis>(d.remaining(a_.clock())).count();
    (void)::poll(fds, static_cast<nfds_t>(n), static_cast<int>(ms));
    step_timed(lock, &s[0], &longest);
    step_timed(sem, &s[1], &longest);
    step_timed(limiter, &s[2], &longest);
    if (std::none_of(s, s + 3, [](Status x) { return x.code() == ErrorCode::kInProgress; })) break;
  }
  const double ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
  std::printf("queries took %.2f ms, longest step %.3f ms\n", ms, longest.count() / 1e6);
  for (const Status& x : s) EXPECT_TRUE(x.ok()) << x.to_string() << ": " << a_.last_error();
  EXPECT_TRUE(ks.held && ks.expires);
  EXPECT_GT(ks.ttl, Millis(20000));
  EXPECT_EQ(used, 1u);
  EXPECT_TRUE(left.allowed);
  EXPECT_EQ(left.remaining, 4);
  EXPECT_GE(ms, 250.0);  // they did wait out the pause, in the loop
  EXPECT_LT(longest, scaled(Millis(20)));

  test::StepLoop loop(1000, 10);
  const Status erased = loop.drive(limiter, limiter.start_erase_on_server(), 1000);
  EXPECT_TRUE(erased.ok()) << erased.to_string();
  EXPECT_EQ(run(admin_, {"EXISTS", "sc:r"}), "0");
  EXPECT_TRUE(permit.release().ok() && lock.release().ok()) << a_.last_error();
}

// While the server holds the connection's request (CLIENT PAUSE), the
// next handles queue in order; one more than the queue holds is refused.
TEST_F(SharedConnection, HandlesTakeTurnsInOrderAndAFullQueueIsNamed) {
  std::vector<std::unique_ptr<Lock>> locks;
  const size_t n = kMaxQueuedHandles + 2;
  for (size_t i = 0; i < n; ++i) {
    locks.push_back(std::make_unique<Lock>(a_));
    const std::string key = "sc:q" + std::to_string(i);
    ASSERT_TRUE(locks.back()->init(Bytes(key.data(), key.size())).ok());
  }
  const std::string pause_ms =
      std::to_string(std::chrono::duration_cast<Millis>(scaled(Millis(300))).count());
  ASSERT_EQ(run(admin_, {"CLIENT", "PAUSE", pause_ms, "ALL"}), "OK");
  std::vector<Status> end(n, Status(ErrorCode::kInProgress));
  for (size_t i = 0; i < n; ++i) end[i] = locks[i]->start_try_acquire();
  std::vector<size_t> order;
  std::string refused_text;
  const Steady::time_point stop = Steady::now() + scaled(Millis(3000));
  for (int turn = 0; turn < 100000 && order.size() < n && Steady::now() < stop; ++turn) {
    pollfd fds[1];
    const size_t k = locks[0]->wait_fds(fds, 1);
    (void)::poll(fds, static_cast<nfds_t>(k), 1);
    for (size_t i = 0; i < n; ++i) {
      if (end[i].code() == ErrorCode::kInProgress) end[i] = locks[i]->step();
      if (end[i].code() != ErrorCode::kInProgress &&
          std::find(order.begin(), order.end(), i) == order.end()) {
        order.push_back(i);
        // The text is the connection's: the next handle's success clears it.
        if (end[i].code() == ErrorCode::kConnectionBusy) refused_text = locks[i]->last_error();
      }
    }
  }
  ASSERT_EQ(order.size(), n);
  // The last handle found the queue full: refused at once, named.
  EXPECT_EQ(end[n - 1].code(), ErrorCode::kConnectionBusy);
  EXPECT_NE(refused_text.find("max_queued_handles"), std::string::npos) << refused_text;
  EXPECT_EQ(order[0], n - 1);
  // The rest ran in the order they started.
  for (size_t i = 0; i + 1 < n; ++i) {
    EXPECT_TRUE(end[i].ok()) << i << ": " << end[i].to_string();
    EXPECT_EQ(order[i + 1], i);
  }
  EXPECT_EQ(run(admin_, {"EXISTS", "sc:q" + std::to_string(n - 1)}), "0");
}

// A blocking call cannot step the handle whose request occupies the
// connection: it waits for its turn until its own deadline, then reports
// kConnectionBusy with nothing sent.
TEST_F(SharedConnection, ABlockingCallGivesUpItsTurnAtItsDeadline) {
  Lock a(a_), b(a_);
  // a's grant is read only after b's blocking call gave up (one command
  // timeout): its TTL must outlast that wait.
  const Millis ttl = std::chrono::duration_cast<Millis>(scaled(Millis(30000)));
  ASSERT_TRUE(a.init(Bytes::from_cstr("sc:a"), LockOptions{ttl}).ok());
  ASSERT_TRUE(b.init(Bytes::from_cstr("sc:b")).ok());
  ASSERT_EQ(run(admin_, {"CLIENT", "PAUSE", "200", "ALL"}), "OK");
  ASSERT_EQ(a.start_try_acquire().code(), ErrorCode::kInProgress);
  const Status s = b.try_acquire();
  EXPECT_EQ(s.code(), ErrorCode::kConnectionBusy) << s.to_string();
  EXPECT_NE(std::string(b.last_error()).find("connection busy"), std::string::npos)
      << b.last_error();
  EXPECT_FALSE(b.held());
  EXPECT_EQ(run(admin_, {"EXISTS", "sc:b"}), "0");
  Status a_end = ErrorCode::kInProgress;
  for (int i = 0; i < 10000 && a_end.code() == ErrorCode::kInProgress; ++i) {
    wait_turn(a_.clock(), {&a}, nullptr, Millis(20));
    a_end = a.step();
  }
  EXPECT_TRUE(a_end.ok()) << a_end.to_string();
  EXPECT_TRUE(a.release().ok());
}

}  // namespace
}  // namespace edgelock
