// The non-blocking face over Redis Sentinel with real servers (a primary,
// a replica, three sentinels): a Lock driven by start_*()/step() from a
// poll() loop acquires on the primary, follows SENTINEL FAILOVER and a
// kill -9 of the primary inside the loop, and a stopped sentinel costs the
// loop time but never a long step(); two FairLock waiters keep their queue
// order across a failover.
#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "../support/keeper_beside.h"
#include "../support/redis_topology.h"
#include "../support/step_loop.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::ms_of;
using test::step_bound;

// The caller's loop (tests/support/step_loop.h): 20000 steps, 20 s.
struct Loop : test::StepLoop {
  Loop() : StepLoop(20000, 20) {}
};

class SentinelStepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(setup_.start()) << "could not start primary, replica and sentinels";
    conn_.connect_timeout = Millis(500) * test::slowdown();
    conn_.command_timeout = Millis(1000) * test::slowdown();
    conn_.reconnect_min = Millis(1);
    conn_.reconnect_max = Millis(10);
    opts_.recheck_interval = Millis(100);
    opts_.retry_pause = Millis(20);
  }
  Status start(Sentinel& s) { return s.init(setup_.url().c_str(), conn_, opts_); }
  std::string token_of(const Lock& lock) {
    return std::string(reinterpret_cast<const char*>(lock.token().data), lock.token().size);
  }
  // The value of `key` on the server at `port` (a bulk string's text).
  static std::string get(int port, const std::string& key) {
    const std::string r = test::raw_command(port, {"GET", key});
    const size_t at = r.find("\r\n");
    return r[0] == '$' && at != std::string::npos && r.size() > at + 2
               ? r.substr(at + 2, r.size() - at - 4)
               : "";
  }

  test::SentinelSetup setup_;
  ConnectionOptions conn_;
  SentinelOptions opts_;
};

TEST_F(SentinelStepTest, AcquireAndReleaseInAPollLoop) {
  Sentinel sentinel, other;
  ASSERT_TRUE(start(sentinel).ok());
  ASSERT_TRUE(start(other).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-gate")).ok());
  ASSERT_TRUE(lock.nonblocking());
  Loop loop;
  // The first start finds the primary through the sentinels as steps.
  ASSERT_EQ(loop.drive(lock, lock.start_acquire(Millis(2000))).code(), ErrorCode::kOk)
      << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.primary().port());
  EXPECT_EQ(get(setup_.primary().port(), "step-gate"), token_of(lock)) << "on the primary";
  EXPECT_GE(sentinel.stats().resolves, 1u);
  Lock rival(other);
  ASSERT_TRUE(rival.init(Bytes::from_cstr("step-gate")).ok());
  EXPECT_EQ(rival.try_acquire().code(), ErrorCode::kBusy) << "held in the server";
  ASSERT_EQ(loop.drive(lock, lock.start_extend(Millis(5000))).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_renew()).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  ASSERT_TRUE(rival.try_acquire().ok()) << "released in the server";
  ASSERT_TRUE(rival.release().ok());
  // Rechecks (every 100 ms) run inside the loop's steps too.
  const uint32_t resolves = sentinel.stats().resolves;
  const TimePoint t0 = sentinel.clock().now();
  for (int i = 0; i < 100 && sentinel.clock().now() - t0 < Millis(600); ++i) {
    ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk);
    ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
    SystemClock().sleep_for(Millis(20));
  }
  EXPECT_GT(sentinel.stats().resolves, resolves) << "rechecked through the steps";
  EXPECT_EQ(sentinel.primary().stats().connects, 1u) << "the known primary kept, not re-verified";
  EXPECT_LT(loop.longest, step_bound());
  std::printf("sentinel start/step: %d steps, longest %.3f ms, %u lookups\n", loop.steps,
              ms_of(loop.longest), sentinel.stats().resolves);
}

// The other primitives on the same routing: a semaphore's permit and a
// rate limiter, driven by their start/step face.
TEST_F(SentinelStepTest, SemaphoreAndRateLimiterInAPollLoop) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Loop loop;
  Semaphore sem(sentinel);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("step-sem")).ok());
  Permit permit;
  ASSERT_EQ(loop.drive(sem, sem.start_try_acquire(&permit)).code(), ErrorCode::kOk)
      << sentinel.last_error();
  ASSERT_TRUE(permit.nonblocking());
  Semaphore rival(sentinel);
  ASSERT_TRUE(rival.init(Bytes::from_cstr("step-sem")).ok());  // one permit
  Permit refused;
  EXPECT_EQ(rival.try_acquire(&refused).code(), ErrorCode::kBusy) << "held in the server";
  uint32_t used = 0;
  ASSERT_EQ(loop.drive(rival, rival.start_in_use(&used)).code(), ErrorCode::kOk);
  EXPECT_EQ(used, 1u);
  ASSERT_EQ(loop.drive(permit, permit.start_release()).code(), ErrorCode::kOk);
  RateLimiter cooldown(sentinel);
  ASSERT_TRUE(cooldown.init(Bytes::from_cstr("step-cooldown")).ok());
  ASSERT_EQ(loop.drive(cooldown, cooldown.start_acquire(Millis(0))).code(), ErrorCode::kOk)
      << sentinel.last_error();
  Admission left;
  ASSERT_EQ(loop.drive(cooldown, cooldown.start_peek(&left)).code(), ErrorCode::kOk);
  EXPECT_FALSE(left.allowed);
  EXPECT_GT(left.retry_after, Millis(0)) << "used up until its window ends";
  ASSERT_EQ(loop.drive(cooldown, cooldown.start_erase_on_server()).code(), ErrorCode::kOk);
  EXPECT_TRUE(cooldown.peek().value().allowed) << "erased: a fresh window";
  EXPECT_LT(loop.longest, step_bound());
}

// A lookup error no pause can fix (the sentinels want a password) ends the
// request at once instead of at its deadline.
TEST_F(SentinelStepTest, SentinelAuthErrorEndsTheRequest) {
  test::RedisServer guarded({"--sentinel"});
  ASSERT_TRUE(guarded.set_config(std::string("sentinel monitor ") + test::SentinelSetup::kMaster +
                                 " 127.0.0.1 " + std::to_string(setup_.primary().port()) +
                                 " 1\nrequirepass s3cret\n"));
  ASSERT_TRUE(guarded.start());
  const std::string url = "redis-sentinel://127.0.0.1:" + std::to_string(guarded.port()) + "/" +
                          test::SentinelSetup::kMaster;
  Sentinel without;
  ASSERT_TRUE(without.init(url.c_str(), conn_, opts_).ok());
  Lock lock(without);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-auth")).ok());
  Loop loop;
  const TimePoint t0 = without.clock().now();
  EXPECT_EQ(loop.drive(lock, lock.start_acquire(Millis(5000))).code(), ErrorCode::kNoAuth)
      << without.last_error();
  EXPECT_LT(without.clock().now() - t0, Millis(2000) * test::slowdown());
  Sentinel with;
  opts_.sentinel_password = "s3cret";
  ASSERT_TRUE(with.init(url.c_str(), conn_, opts_).ok());
  Lock ok(with);
  ASSERT_TRUE(ok.init(Bytes::from_cstr("step-auth")).ok());
  ASSERT_EQ(loop.drive(ok, ok.start_try_acquire()).code(), ErrorCode::kOk) << with.last_error();
  ASSERT_EQ(loop.drive(ok, ok.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
}

// With wait_replicas the non-blocking face confirms each grant and
// extension with WAIT, a further step on the primary: a grant counts once
// the replica has it; with the replica stopped, an extend and an acquire
// end as kNoQuorum by wait_timeout, claiming nothing new (the unconfirmed
// grant is handed back), every step short.
TEST_F(SentinelStepTest, WaitReplicasConfirmedAsSteps) {
  Sentinel waiting;
  opts_.wait_replicas = 1;
  opts_.wait_timeout = Millis(300) * test::slowdown();
  ASSERT_TRUE(start(waiting).ok());
  const Millis ttl(5000);
  Lock lock(waiting), late(waiting);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-wait"), LockOptions{ttl}).ok());
  ASSERT_TRUE(late.init(Bytes::from_cstr("step-wait-2"), LockOptions{ttl}).ok());
  ASSERT_TRUE(lock.nonblocking());
  const int p = setup_.primary().port();
  const uint32_t waits = test::command_calls(p, "wait");
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk)
      << waiting.last_error();
  EXPECT_EQ(test::command_calls(p, "wait"), waits + 1) << "the grant was confirmed";
  EXPECT_EQ(get(setup_.replica().port(), "step-wait"), token_of(lock)) << "the replica has it";
  setup_.replica().pause();
  const Status extended = loop.drive(lock, lock.start_extend(Millis(60000)));
  const Status acquired = loop.drive(late, late.start_try_acquire());
  setup_.replica().resume();
  EXPECT_EQ(extended.code(), ErrorCode::kNoQuorum) << waiting.last_error();
  EXPECT_LE(lock.remaining(), Nanos(ttl)) << "an unconfirmed extension adds nothing";
  EXPECT_EQ(acquired.code(), ErrorCode::kNoQuorum) << waiting.last_error();
  EXPECT_FALSE(late.held());
  EXPECT_EQ(get(p, "step-wait-2"), "") << "the unconfirmed grant was handed back";
  EXPECT_EQ(waiting.stats().wait_failures, 2u);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk) << waiting.last_error();
  EXPECT_LT(loop.longest, step_bound());
  std::printf("sentinel WAIT as steps: %d steps, longest %.3f ms\n", loop.steps,
              ms_of(loop.longest));
}

// SENTINEL FAILOVER while a lock is held: the loop's later operations reach
// the promoted replica (by a recheck, or READONLY from the demoted primary).
TEST_F(SentinelStepTest, FollowsManualFailoverInsideTheLoop) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-failover")).ok());
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk)
      << sentinel.last_error();
  const std::string token = token_of(lock);
  // The grant is on the replica before the failover (asynchronous
  // replication, no WAIT here).
  for (int i = 0; i < 250 && get(setup_.replica().port(), "step-failover") != token; ++i) {
    SystemClock().sleep_for(Millis(20));
  }
  ASSERT_EQ(get(setup_.replica().port(), "step-failover"), token);
  // A second client that only looks again after an error (no rechecks).
  Sentinel lazy;
  opts_.recheck_interval = Nanos::zero();
  ASSERT_TRUE(start(lazy).ok());
  Lock lazy_lock(lazy);
  ASSERT_TRUE(lazy_lock.init(Bytes::from_cstr("step-hatch")).ok());
  ASSERT_EQ(loop.drive(lazy_lock, lazy_lock.start_try_acquire()).code(), ErrorCode::kOk);
  for (int i = 0; i < 250 && get(setup_.replica().port(), "step-hatch") != token_of(lazy_lock);
       ++i) {
    SystemClock().sleep_for(Millis(20));
  }
  ASSERT_EQ(setup_.failover(), "+OK\r\n");
  const TimePoint t0 = sentinel.clock().now();
  const Nanos limit = Millis(10000) * test::slowdown();
  bool moved = false;
  Status last;
  for (int i = 0; i < 1000 && !moved && sentinel.clock().now() - t0 < limit; ++i) {
    last = loop.drive(lock, lock.start_extend(Millis(5000)));
    moved = last.ok() && sentinel.primary().endpoint().port == setup_.replica().port();
    if (!moved) SystemClock().sleep_for(Millis(20));
  }
  const Nanos took = sentinel.clock().now() - t0;
  ASSERT_TRUE(moved) << last.to_string() << " " << sentinel.last_error();
  EXPECT_GE(sentinel.stats().primary_changes, 1u);
  // A fresh lock granted through the loop lands on the new primary.
  Lock after(sentinel);
  ASSERT_TRUE(after.init(Bytes::from_cstr("step-after")).ok());
  ASSERT_EQ(loop.drive(after, after.start_acquire(Millis(2000))).code(), ErrorCode::kOk)
      << sentinel.last_error();
  EXPECT_EQ(get(setup_.replica().port(), "step-after"), token_of(after));
  ASSERT_EQ(loop.drive(after, after.start_release()).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  // Demote the old primary now (Sentinel would, seconds later): the lazy
  // client's extend gets READONLY there, and the same request goes on to
  // the primary the steps' lookup finds.
  EXPECT_EQ(lazy.primary().endpoint().port, setup_.primary().port());
  EXPECT_EQ(test::raw_command(setup_.primary().port(),
                              {"REPLICAOF", "127.0.0.1", std::to_string(setup_.replica().port())}),
            "+OK\r\n");
  EXPECT_EQ(loop.drive(lazy_lock, lazy_lock.start_extend(Millis(5000))).code(), ErrorCode::kOk)
      << lazy.last_error();
  EXPECT_GE(lazy.stats().readonly, 1u);
  EXPECT_EQ(lazy.primary().endpoint().port, setup_.replica().port());
  EXPECT_EQ(loop.drive(lazy_lock, lazy_lock.start_release()).code(), ErrorCode::kOk);
  // The back end's own blocking call is the same routed steps: it reaches
  // the new primary.
  Backend& backend = sentinel;
  const Bytes set[3] = {Bytes::from_cstr("SET"), Bytes::from_cstr("step-backend"),
                        Bytes::from_cstr("v")};
  const Result<const Reply*> r =
      backend.command(set[1], set, Deadline::after(sentinel.clock(), Millis(3000)));
  EXPECT_TRUE(r.ok()) << r.status().to_string() << " " << sentinel.last_error();
  EXPECT_EQ(get(setup_.replica().port(), "step-backend"), "v");
  EXPECT_LT(loop.longest, step_bound());
  std::printf(
      "sentinel start/step: manual failover followed in %.0f ms, %d steps, longest %.3f ms, "
      "lazy client readonly=%u\n",
      ms_of(took), loop.steps, ms_of(loop.longest), lazy.stats().readonly);
}

// Two FairLock waiters queued behind a holder, each on its own Sentinel,
// stepped from one poll() loop through SENTINEL FAILOVER and the old
// primary's demotion (which ends their BLPOPs there): their places moved
// with the data, and the holder's release on the new primary hands the
// lock over in queue order.
TEST_F(SentinelStepTest, FairLockKeepsQueueOrderAcrossFailover) {
  Sentinel sh, sa, sb;
  ASSERT_TRUE(start(sh).ok());
  // The waiters look again only after an error: they stay on the old
  // primary until its demotion ends their BLPOPs there.
  opts_.recheck_interval = Nanos::zero();
  ASSERT_TRUE(start(sa).ok() && start(sb).ok());
  FairLockOptions fo;
  fo.waiter_timeout = Millis(5000);  // places outlive the failover
  fo.retry_max = Millis(50);
  const Bytes key = Bytes::from_cstr("fair-failover");
  FairLock holder(sh), a(sa), b(sb);
  ASSERT_TRUE(holder.init(key, fo).ok() && a.init(key, fo).ok() && b.init(key, fo).ok());
  ASSERT_TRUE(a.nonblocking() && b.nonblocking());
  Loop loop;
  ASSERT_EQ(loop.drive(holder, holder.start_try_acquire()).code(), ErrorCode::kOk)
      << sh.last_error();
  Lease* ops[3] = {&a, &b, &holder};
  Status st[3] = {a.start_acquire(Millis(30000) * test::slowdown()), ErrorCode::kInProgress,
                  ErrorCode::kOk};
  const Nanos limit = Millis(10000) * test::slowdown();
  ASSERT_TRUE(loop.drive_all(ops, st, 1, limit, [&] { return a.queue_position() == 1; }));
  st[1] = b.start_acquire(Millis(30000) * test::slowdown());
  ASSERT_TRUE(loop.drive_all(ops, st, 2, limit, [&] { return b.queue_position() == 2; }));
  // The queue is on the replica before the failover (asynchronous).
  const int p = setup_.primary().port(), r = setup_.replica().port();
  const auto replicated = [&] {
    const std::string q = test::raw_command(r, {"HLEN", "{fair-failover}:queue"});
    return q != ":0\r\n" && q == test::raw_command(p, {"HLEN", "{fair-failover}:queue"});
  };
  ASSERT_TRUE(loop.drive_all(ops, st, 2, limit, replicated));
  ASSERT_EQ(setup_.failover(), "+OK\r\n");
  const auto promoted = [&] {
    return test::raw_command(r, {"ROLE"}).find("master") != std::string::npos;
  };
  ASSERT_TRUE(loop.drive_all(ops, st, 2, limit, promoted));
  // Demote the old primary now (Sentinel would, later): it ends the
  // waiters' BLPOPs there with an error and closes their connections, so
  // the attempts pipelined behind never run (to the waiters an unknown
  // outcome): they retry with the same token on the primary a lookup finds.
  EXPECT_EQ(test::raw_command(p, {"REPLICAOF", "127.0.0.1", std::to_string(r)}), "+OK\r\n");
  st[2] = holder.start_release();
  ASSERT_TRUE(
      loop.drive_all(ops, st, 3, limit, [&] { return st[0].code() != ErrorCode::kInProgress; }));
  ASSERT_EQ(st[0].code(), ErrorCode::kOk) << st[0].to_string() << " " << sa.last_error();
  EXPECT_EQ(st[1].code(), ErrorCode::kInProgress) << "b waits behind a";
  // The holder's release may still be waking the head (a step of its own).
  loop.drive_all(ops, st, 3, limit, [&] { return st[2].code() != ErrorCode::kInProgress; });
  EXPECT_EQ(st[2].code(), ErrorCode::kOk) << st[2].to_string();
  EXPECT_EQ(st[1].code(), ErrorCode::kInProgress) << "b still waits behind a";
  EXPECT_EQ(get(r, "fair-failover"),
            std::string(reinterpret_cast<const char*>(a.token().data), a.token().size));
  // a's release hands over to b (and may wake it in a step of its own).
  st[0] = a.start_release();
  ASSERT_TRUE(loop.drive_all(ops, st, 2, limit, [&] {
    return st[0].code() != ErrorCode::kInProgress && st[1].code() != ErrorCode::kInProgress;
  }));
  ASSERT_EQ(st[1].code(), ErrorCode::kOk) << st[1].to_string() << " " << sb.last_error();
  EXPECT_EQ(st[0].code(), ErrorCode::kOk) << st[0].to_string();
  EXPECT_EQ(get(r, "fair-failover"),
            std::string(reinterpret_cast<const char*>(b.token().data), b.token().size));
  EXPECT_EQ(sa.primary().endpoint().port, r);
  EXPECT_EQ(sb.primary().endpoint().port, r);
  EXPECT_GE(sa.stats().resolves, 2u) << "a looked again after its wait there failed";
  EXPECT_GE(sb.stats().resolves, 2u) << "b looked again after its wait there failed";
  EXPECT_GE(sa.primary().stats().connects, 2u);
  ASSERT_EQ(loop.drive(b, b.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
  std::printf(
      "sentinel fair start/step: failover with 2 queued, %d steps, longest %.3f ms, readonly "
      "a=%u b=%u, lookups a=%u b=%u\n",
      loop.steps, ms_of(loop.longest), sa.stats().readonly, sb.stats().readonly,
      sa.stats().resolves, sb.stats().resolves);
}

// A keeper's Lock and a waiting FairLock on one Sentinel object: the
// waiter polls (no BLPOP on the primary's connection they share), so the
// keeper's renewals all go through.
// The fair scripts are too long to re-send by body: a primary that has
// lost them gets SCRIPT LOAD, then the call again. With the primary due
// for a recheck at every step, the load still goes out, to the node that
// refused the call, instead of ending the request while the primary is
// looked up again.
TEST_F(SentinelStepTest, FairLockLoadsItsScriptWhileThePrimaryIsRechecked) {
  opts_.recheck_interval = Millis(1);
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  FairLock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-fair-load")).ok());
  const int port = setup_.primary().port();
  ASSERT_EQ(test::raw_command(port, {"SCRIPT", "FLUSH"}), "+OK\r\n");
  const uint32_t loads = test::command_calls(port, "script|load");
  Status s = lock.start_try_acquire();
  for (int i = 0; i < 2000 && s.code() == ErrorCode::kInProgress; ++i) {
    pollfd fds[kMaxWaitFds];
    const size_t n = lock.wait_fds(fds, kMaxWaitFds);
    poll(fds, n, 5);
    // Every step finds the primary due for a recheck.
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    s = lock.step();
  }
  ASSERT_EQ(s.code(), ErrorCode::kOk) << s.to_string() << ": " << lock.last_error();
  EXPECT_EQ(test::command_calls(port, "script|load"), loads + 1) << "one SCRIPT LOAD";
  Loop loop;
  EXPECT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
}

// Two FairLocks on one Sentinel share the primary's connection. After the
// server lost the fair scripts, both lose their first request to NOSCRIPT
// while the other waits for the connection: each SCRIPT LOAD goes out as
// its NOSCRIPT reply frees the node (never kConnectionBusy), and both get
// their locks.
TEST_F(SentinelStepTest, FairLocksSharingANodeLoadTheirScriptsInTurn) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  const int port = setup_.primary().port();
  for (int round = 0; round < 5; ++round) {
    FairLock a(sentinel), b(sentinel);
    ASSERT_TRUE(a.init(Bytes::from_cstr("step-turn-a")).ok());
    ASSERT_TRUE(b.init(Bytes::from_cstr("step-turn-b")).ok());
    ASSERT_EQ(test::raw_command(port, {"SCRIPT", "FLUSH"}), "+OK\r\n");
    Status sa = a.start_try_acquire();
    Status sb = b.start_try_acquire();
    for (int i = 0; i < 4000; ++i) {
      const bool a_on = sa.code() == ErrorCode::kInProgress;
      const bool b_on = sb.code() == ErrorCode::kInProgress;
      if (!a_on && !b_on) break;
      pollfd fds[2 * kMaxWaitFds];
      size_t n = a_on ? a.wait_fds(fds, kMaxWaitFds) : 0;
      n += b_on ? b.wait_fds(fds + n, kMaxWaitFds) : 0;
      poll(fds, n, 2);
      // b steps first: it reads whatever reached the shared connection.
      if (b_on) sb = b.step();
      if (a_on) sa = a.step();
    }
    EXPECT_EQ(sa.code(), ErrorCode::kOk)
        << "round " << round << ": " << sa.to_string() << ": " << a.last_error();
    EXPECT_EQ(sb.code(), ErrorCode::kOk)
        << "round " << round << ": " << sb.to_string() << ": " << b.last_error();
    Loop loop;
    if (sa.ok()) {
      EXPECT_EQ(loop.drive(a, a.start_release()).code(), ErrorCode::kOk);
    }
    if (sb.ok()) {
      EXPECT_EQ(loop.drive(b, b.start_release()).code(), ErrorCode::kOk);
    }
  }
}

TEST_F(SentinelStepTest, KeeperKeepsItsLeaseBesideAFairWaiter) {
  Sentinel shared, other;
  ASSERT_TRUE(start(shared).ok() && start(other).ok());
  const Bytes kb = Bytes::from_cstr("beside-b");
  FairLock holder(other), waiter(shared);
  FairLockOptions held;  // outlasts the test, also under qemu
  held.ttl = std::chrono::duration_cast<Millis>(Millis(60000) * test::slowdown());
  ASSERT_TRUE(holder.init(kb, held).ok() && waiter.init(kb).ok());
  ASSERT_TRUE(holder.try_acquire().ok()) << other.last_error();
  Lock a(shared);
  const Millis ttl = std::chrono::duration_cast<Millis>(Millis(3000) * test::slowdown());
  ASSERT_TRUE(a.init(Bytes::from_cstr("beside-a"), LockOptions{ttl}).ok());
  ASSERT_TRUE(a.try_acquire().ok()) << shared.last_error();
  test::expect_kept_beside(a, waiter, setup_.primary().port());
  EXPECT_TRUE(a.release().ok()) << shared.last_error();
  EXPECT_TRUE(holder.release().ok()) << other.last_error();
}

// kill -9 of the primary: the loop's acquire waits (retrying) while the
// sentinels elect the replica, then gets the lock there.
TEST_F(SentinelStepTest, FollowsKill9InsideTheLoop) {
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  LockOptions lo;
  lo.retry_max = Millis(50);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-kill"), lo).ok());
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  setup_.primary().kill9();
  const TimePoint t0 = sentinel.clock().now();
  const Status s = loop.drive(lock, lock.start_acquire(Millis(15000) * test::slowdown()));
  const Nanos took = sentinel.clock().now() - t0;
  ASSERT_EQ(s.code(), ErrorCode::kOk) << s.to_string() << " " << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.replica().port());
  EXPECT_EQ(get(setup_.replica().port(), "step-kill"), token_of(lock));
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_LT(loop.steps, 20000);
  std::printf("sentinel start/step: kill -9 followed in %.0f ms, %d steps, longest %.3f ms\n",
              ms_of(took), loop.steps, ms_of(loop.longest));
}

// The primary freezes (SIGSTOP) under a client that never rechecks: the
// loop's request there times out, which closes the connection, so the next
// attempt looks the primary up, waits out the frozen node's ROLE as steps
// while the sentinels fail over, and gets the lock on the promoted replica.
TEST_F(SentinelStepTest, FrozenPrimaryFollowedWithoutRechecks) {
  Sentinel sentinel;
  opts_.recheck_interval = Nanos::zero();
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  LockOptions lo;
  lo.retry_max = Millis(50);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-frozen"), lo).ok());
  Loop loop;
  ASSERT_EQ(loop.drive(lock, lock.start_try_acquire()).code(), ErrorCode::kOk);
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  setup_.primary().pause();
  const TimePoint t0 = sentinel.clock().now();
  const Status s = loop.drive(lock, lock.start_acquire(Millis(15000) * test::slowdown()));
  const Nanos took = sentinel.clock().now() - t0;
  setup_.primary().resume();
  ASSERT_EQ(s.code(), ErrorCode::kOk) << s.to_string() << " " << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.replica().port());
  EXPECT_EQ(get(setup_.replica().port(), "step-frozen"), token_of(lock));
  EXPECT_LT(loop.longest, step_bound());
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  std::printf(
      "sentinel start/step: frozen primary followed in %.0f ms, %d steps, longest %.3f ms\n",
      ms_of(took), loop.steps, ms_of(loop.longest));
}

// The first sentinel is stopped (SIGSTOP: it accepts connections and never
// answers). The lookup waits it out for one command timeout as steps and
// asks the next: the loop takes that long, no step does.
TEST_F(SentinelStepTest, StoppedSentinelNeverBlocksAStep) {
  setup_.sentinel(0).pause();
  Sentinel sentinel;
  ASSERT_TRUE(start(sentinel).ok());
  Lock lock(sentinel);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("step-stopped")).ok());
  Loop loop;
  const TimePoint t0 = sentinel.clock().now();
  const Status s = loop.drive(lock, lock.start_acquire(Millis(5000) * test::slowdown()));
  const Nanos took = sentinel.clock().now() - t0;
  setup_.sentinel(0).resume();
  ASSERT_EQ(s.code(), ErrorCode::kOk) << s.to_string() << " " << sentinel.last_error();
  EXPECT_EQ(sentinel.primary().endpoint().port, setup_.primary().port());
  EXPECT_GE(took, conn_.command_timeout) << "the stopped sentinel was asked and waited out";
  EXPECT_LT(loop.longest, step_bound());
  EXPECT_GT(loop.steps, 3) << "the wait was spread over steps";
  EXPECT_LT(loop.steps, 5000) << "polled every few ms, no spinning";
  ASSERT_EQ(loop.drive(lock, lock.start_release()).code(), ErrorCode::kOk);
  std::printf(
      "sentinel start/step: stopped sentinel waited out in %.0f ms over %d steps, longest %.3f "
      "ms\n",
      ms_of(took), loop.steps, ms_of(loop.longest));
}

}  // namespace
}  // namespace edgelock
