// Lease keeper: timing with a FakeClock, renewals against a real server.
#include <gtest/gtest.h>
#include <poll.h>

#include <string>

#include "../support/fake_clock.h"
#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::run;

// A scripted lease for exact timing: validity ends at `valid_until`, and
// renew() does what the test says (it may also move time forward).
struct FakeLock final : Lease {
  FakeClock* fake = nullptr;
  TimePoint valid_until;
  Nanos grant = Millis(3000);
  Nanos renew_takes{0};
  Status next = Status();
  int renews = 0;

  Status renew() override {
    ++renews;
    const TimePoint start = fake->now();
    fake->advance(renew_takes);
    if (next.ok()) valid_until = start + grant;
    if (next.code() == ErrorCode::kNotOwner) valid_until = TimePoint();
    return next;
  }
  Nanos remaining() const override {
    const Nanos left = valid_until - fake->now();
    return left > Nanos::zero() ? left : Nanos::zero();
  }
  Status release() override { return ErrorCode::kNotHeld; }
  Nanos renew_budget() const override { return Nanos::zero(); }  // unknown
  const char* last_error() const override { return ""; }
  Clock& clock() const override { return *fake; }
  Bytes key() const override { return Bytes::from_cstr("fake"); }
  Bytes token() const override { return Bytes(); }
  uint64_t fence() const override { return 0; }
};

class KeeperTimingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lock_.fake = &clock_;
    lock_.valid_until = clock_.now() + lock_.grant;
  }
  FakeClock clock_;
  FakeLock lock_;
};

TEST_F(KeeperTimingTest, RenewsAtAThirdOfTheValidity) {
  LeaseKeeper keeper(lock_);
  EXPECT_TRUE(keeper.next_deadline().is_never()) << "idle keeper has no deadline";
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint t0 = clock_.now();
  EXPECT_EQ(keeper.next_deadline().when(), t0 + Millis(1000));
  clock_.advance(Millis(999));
  EXPECT_EQ(keeper.step(), LeaseState::kKeeping);
  EXPECT_EQ(lock_.renews, 0) << "renewed early";
  for (int i = 1; i <= 5; ++i) {
    clock_.sleep_for(keeper.next_deadline().remaining(clock_));
    EXPECT_EQ(keeper.step(), LeaseState::kKeeping);
    EXPECT_EQ(lock_.renews, i);
  }
  EXPECT_EQ(keeper.stats().renewals, 5u);
  EXPECT_EQ(clock_.now(), t0 + Millis(5000));
  keeper.stop();
  EXPECT_EQ(keeper.state(), LeaseState::kIdle);
  EXPECT_TRUE(keeper.next_deadline().is_never());
}

TEST_F(KeeperTimingTest, ReportsLostWhenValidityRunsOutWithoutRenewal) {
  lock_.next = ErrorCode::kTimeout;  // every renewal fails transiently
  LeaseKeeper keeper(lock_);
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint end = lock_.valid_until;
  for (int i = 0; i < 100 && keeper.state() == LeaseState::kKeeping; ++i) {
    const Deadline d = keeper.next_deadline();
    ASSERT_LE(d.when(), end) << "the validity's end is always a deadline";
    clock_.sleep_for(d.remaining(clock_));
    keeper.step();
    if (clock_.now() < end) {
      EXPECT_EQ(keeper.state(), LeaseState::kKeeping);
    }
  }
  EXPECT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.lost_at(), end) << "reported exactly when validity ran out";
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
  EXPECT_GE(keeper.stats().failures, 2u) << "retried before giving up";
  const int renews = lock_.renews;
  clock_.advance(Millis(10000));
  EXPECT_EQ(keeper.step(), LeaseState::kLost);
  EXPECT_EQ(lock_.renews, renews) << "a lost lease is never renewed again";
}

TEST_F(KeeperTimingTest, TransientFailureThenRecovery) {
  LeaseKeeper keeper(lock_);
  ASSERT_TRUE(keeper.start().ok());
  lock_.next = ErrorCode::kIo;
  clock_.sleep_for(keeper.next_deadline().remaining(clock_));
  EXPECT_EQ(keeper.step(), LeaseState::kKeeping);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kIo);
  lock_.next = Status();
  clock_.sleep_for(keeper.next_deadline().remaining(clock_));
  EXPECT_EQ(keeper.step(), LeaseState::kKeeping);
  EXPECT_EQ(keeper.stats().failures, 1u);
  EXPECT_EQ(keeper.stats().renewals, 1u);
}

TEST_F(KeeperTimingTest, StopsAtNotOwner) {
  LeaseKeeper keeper(lock_);
  ASSERT_TRUE(keeper.start().ok());
  lock_.next = ErrorCode::kNotOwner;
  clock_.sleep_for(keeper.next_deadline().remaining(clock_));
  EXPECT_EQ(keeper.step(), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kNotOwner);
  EXPECT_TRUE(keeper.next_deadline().is_never());
  clock_.advance(Millis(5000));
  EXPECT_EQ(keeper.step(), LeaseState::kLost);
  EXPECT_EQ(lock_.renews, 1);
}

// The loss reads as what happened: a kExpired loss is no grant that came
// too late, and the code's own name fits both of its uses.
TEST_F(KeeperTimingTest, LossTextSaysWhatHappened) {
  lock_.next = ErrorCode::kTimeout;
  LeaseKeeper expired(lock_);
  ASSERT_TRUE(expired.start().ok());
  EXPECT_STREQ(expired.loss_text(), "") << "not lost yet";
  for (int i = 0; i < 100 && expired.state() == LeaseState::kKeeping; ++i) {
    clock_.sleep_for(expired.next_deadline().remaining(clock_));
    expired.step();
  }
  ASSERT_EQ(expired.last_status().code(), ErrorCode::kExpired);
  EXPECT_NE(std::string(expired.loss_text()).find("no renewal"), std::string::npos)
      << expired.loss_text();
  const std::string name = expired.last_status().to_string();
  EXPECT_EQ(name.find("grant"), std::string::npos) << name;
  EXPECT_NE(name.find("ran out"), std::string::npos) << name;

  lock_.valid_until = clock_.now() + lock_.grant;
  lock_.next = ErrorCode::kNotOwner;
  LeaseKeeper taken(lock_);
  ASSERT_TRUE(taken.start().ok());
  clock_.sleep_for(taken.next_deadline().remaining(clock_));
  ASSERT_EQ(taken.step(), LeaseState::kLost);
  EXPECT_NE(std::string(taken.loss_text()).find("another owner"), std::string::npos)
      << taken.loss_text();
}

TEST_F(KeeperTimingTest, RenewalFinishingAfterValidityEndCountsAsLost) {
  KeeperOptions o;
  o.renew_every = Millis(2900);
  LeaseKeeper keeper(lock_, o);
  ASSERT_TRUE(keeper.start().ok());
  lock_.renew_takes = Millis(200);  // starts at 2900, answers at 3100 > 3000
  clock_.sleep_for(keeper.next_deadline().remaining(clock_));
  EXPECT_EQ(keeper.step(), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
}

TEST_F(KeeperTimingTest, StartNeedsAHeldLock) {
  lock_.valid_until = TimePoint();
  LeaseKeeper keeper(lock_);
  EXPECT_EQ(keeper.start().code(), ErrorCode::kNotHeld);
}

// A renewal may block for its whole budget: the keeper starts one only
// while it would still end before the validity, and reports the loss at
// the validity's end, never later.
TEST_F(KeeperTimingTest, RenewalsStartOnlyWhileTheirBudgetFits) {
  KeeperOptions o;
  o.renew_budget = Millis(2000);
  lock_.next = ErrorCode::kTimeout;
  lock_.renew_takes = Millis(2000);  // every renewal times out after its budget
  LeaseKeeper keeper(lock_, o);
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint end = lock_.valid_until;
  EXPECT_EQ(keeper.next_deadline().when(), clock_.now() + Millis(500)) << "half the slack";
  for (int i = 0; i < 10 && keeper.state() == LeaseState::kKeeping; ++i) {
    clock_.sleep_for(keeper.next_deadline().remaining(clock_));
    keeper.step();
    EXPECT_LE(clock_.now(), end) << "step() returned after the validity ended";
  }
  EXPECT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.lost_at(), end);
  EXPECT_EQ(lock_.renews, 1) << "a second renewal could not end in time";
}

TEST_F(KeeperTimingTest, LoseBeforeReportsEarlyAndRefusesWhatCannotFit) {
  KeeperOptions o;
  o.lose_before = Millis(500);
  lock_.next = ErrorCode::kIo;  // renewals fail at once
  LeaseKeeper keeper(lock_, o);
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint end = lock_.valid_until;
  for (int i = 0; i < 100 && keeper.state() == LeaseState::kKeeping; ++i) {
    clock_.sleep_for(keeper.next_deadline().remaining(clock_));
    keeper.step();
  }
  EXPECT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.lost_at(), end - Millis(500));
  EXPECT_GE(lock_.renews, 2);
  // A renewal that succeeds but leaves no more than lose_before is a loss.
  lock_.valid_until = clock_.now() + lock_.grant;
  lock_.next = Status();
  lock_.grant = Millis(400);
  LeaseKeeper thin(lock_, o);
  ASSERT_TRUE(thin.start().ok());
  clock_.sleep_for(thin.next_deadline().remaining(clock_));
  EXPECT_EQ(thin.step(), LeaseState::kLost);
  // lose_before + budget must leave room for one renewal.
  o.renew_budget = lock_.remaining() - o.lose_before;
  LeaseKeeper refused(lock_, o);
  EXPECT_EQ(refused.start().code(), ErrorCode::kInvalidArgument);
}

// I/O takes no time on a FakeClock: a small renew budget (instead of the
// connection's command timeout, scaled up under emulation) keeps TTL/3.
KeeperOptions fake_io() {
  KeeperOptions o;
  o.renew_budget = Millis(1);
  return o;
}

// Against a real server, with time on a FakeClock so TTL/3 is exact.
class KeeperRedisTest : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(test::open(conn_, server_->url(), &clock_));
    ASSERT_TRUE(test::open(admin_, server_->admin_url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
    LockOptions o;
    o.ttl = Millis(3000);
    ASSERT_TRUE(lock_.init(Bytes::from_cstr("modem"), o).ok());
    ASSERT_TRUE(lock_.try_acquire().ok()) << conn_.last_error();
  }
  // Moves to the keeper's next deadline and services it; a renewal it
  // starts (without blocking) is then stepped on its socket, in real time
  // (the fake clock stands still), to its end.
  LeaseState step(LeaseKeeper& k) {
    clock_.sleep_for(k.next_deadline().remaining(clock_));
    LeaseState s = k.step();
    for (int i = 0; i < 100 && k.renewing(); ++i) {
      pollfd fds[kMaxWaitFds];
      poll(fds, k.wait_fds(fds, kMaxWaitFds), 100);
      s = k.step();
    }
    return s;
  }

  FakeClock clock_;
  Connection conn_, admin_;
  Lock lock_{conn_};
};

TEST_F(KeeperRedisTest, RenewsOnTheServer) {
  LeaseKeeper keeper(lock_, fake_io());
  ASSERT_TRUE(keeper.start().ok());
  EXPECT_EQ(step(keeper), LeaseState::kKeeping);  // also loads the script
  // Shorten the server's TTL behind our back: only a real renewal restores it.
  ASSERT_EQ(run(admin_, {"PEXPIRE", "modem", "500"}), "1");
  const uint32_t before = conn_.stats().commands;
  EXPECT_EQ(step(keeper), LeaseState::kKeeping);
  EXPECT_EQ(conn_.stats().commands, before + 1) << "one round trip per renewal";
  EXPECT_GT(std::stoi(run(admin_, {"PTTL", "modem"})), 2000);
  EXPECT_EQ(run(admin_, {"GET", "modem"}),
            std::string(reinterpret_cast<const char*>(lock_.token().data), lock_.token().size));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(keeper), LeaseState::kKeeping);
  EXPECT_EQ(keeper.stats().renewals, 5u);
  EXPECT_GT(lock_.remaining(), Millis(2900));
}

// A keeper that goes away with a renewal out cancels it (as stop()): the
// lease is free for the caller's release() at once.
TEST_F(KeeperRedisTest, DestroyedMidRenewalLeavesTheLeaseUsable) {
  {
    LeaseKeeper keeper(lock_, fake_io());
    ASSERT_TRUE(keeper.start().ok());
    clock_.sleep_for(keeper.next_deadline().remaining(clock_));
    EXPECT_EQ(keeper.step(), LeaseState::kKeeping);
    ASSERT_TRUE(keeper.renewing()) << "the renewal is out, its reply unread";
  }
  EXPECT_TRUE(lock_.release().ok()) << lock_.last_error();
  EXPECT_EQ(run(admin_, {"EXISTS", "modem"}), "0");
}

TEST_F(KeeperRedisTest, RenewBudgetComesFromTheLock) {
  // The fixture's 3 s lease cannot hold one renewal of the command timeout
  // the tests use under qemu (2 s x slowdown): give this lock a TTL that can.
  ASSERT_TRUE(lock_.release().ok());
  LockOptions o;
  o.ttl = 3 * std::chrono::floor<Millis>(conn_.options().command_timeout);
  ASSERT_TRUE(lock_.init(Bytes::from_cstr("modem"), o).ok());
  ASSERT_TRUE(lock_.try_acquire().ok()) << conn_.last_error();
  LeaseKeeper keeper(lock_);
  ASSERT_TRUE(keeper.start().ok());
  EXPECT_EQ(keeper.renew_budget(), conn_.options().command_timeout);
  Semaphore sem(conn_);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem")).ok());
  Permit permit;
  ASSERT_TRUE(sem.try_acquire(&permit).ok());
  // renew_budget() is for the keeper: asked through Lease&, as it does.
  EXPECT_EQ(static_cast<const Lease&>(permit).renew_budget(), conn_.options().command_timeout);
  ASSERT_TRUE(permit.release().ok());
  Connection* conns[1] = {&conn_};
  QuorumOptions qo;
  qo.server_timeout = Millis(77);
  QuorumLock q;
  ASSERT_TRUE(q.init(conns, 1, Bytes::from_cstr("q"), qo).ok());
  EXPECT_EQ(static_cast<const Lease&>(q).renew_budget(), Millis(77));
}

TEST_F(KeeperRedisTest, OverwrittenKeyIsLostAndLeftAlone) {
  LeaseKeeper keeper(lock_, fake_io());
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_EQ(run(admin_, {"SET", "modem", "someone-else", "PX", "60000"}), "OK");
  EXPECT_EQ(step(keeper), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kNotOwner);
  EXPECT_FALSE(lock_.held());
  EXPECT_EQ(run(admin_, {"GET", "modem"}), "someone-else");
  const uint32_t commands = conn_.stats().commands;
  clock_.advance(Millis(5000));
  EXPECT_EQ(keeper.step(), LeaseState::kLost);
  EXPECT_EQ(conn_.stats().commands, commands) << "no I/O after the loss";
}

TEST_F(KeeperRedisTest, DeletedKeyIsNeverRecreated) {
  LeaseKeeper keeper(lock_, fake_io());
  ASSERT_TRUE(keeper.start().ok());
  ASSERT_EQ(run(admin_, {"DEL", "modem"}), "1");
  EXPECT_EQ(step(keeper), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kNotOwner);
  EXPECT_EQ(run(admin_, {"EXISTS", "modem"}), "0");
}

TEST_F(KeeperRedisTest, ServerGoneMeansLostAtValidityEnd) {
  RedisServer own;
  ASSERT_TRUE(own.start());
  FakeClock clock;
  Connection conn;
  ASSERT_TRUE(test::open(conn, own.url(), &clock));
  Lock lock(conn);
  LockOptions o;
  o.ttl = Millis(3000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  LeaseKeeper keeper(lock, fake_io());
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint end = clock.now() + lock.remaining();
  own.kill9();
  for (int i = 0; i < 100 && keeper.state() == LeaseState::kKeeping; ++i) {
    clock.sleep_for(keeper.next_deadline().remaining(clock));
    keeper.step();
  }
  EXPECT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
  EXPECT_EQ(keeper.lost_at(), end);
  EXPECT_GE(keeper.stats().failures, 1u);
}

}  // namespace
}  // namespace edgelock
