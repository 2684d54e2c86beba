// Single-instance lock against a real redis-server.
#include <gtest/gtest.h>

#include <string>

#include "../support/fake_clock.h"
#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::run;

class LockTest : public test::SharedServerTest {
 protected:
  LockOptions ttl(int64_t ms) {
    LockOptions o;
    o.ttl = Millis(ms);
    return o;
  }
};

TEST_F(LockTest, AcquireReleaseCycle) {
  Lock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), ttl(5000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << a_.last_error();
  EXPECT_TRUE(lock.held());
  EXPECT_GT(lock.remaining(), Millis(4800));
  EXPECT_LE(lock.remaining(), Millis(5000) - Millis(50) - Millis(2)) << "drift allowance";
  EXPECT_EQ(lock.token().size, 32u);
  EXPECT_EQ(run(admin_, {"GET", "modem"}),
            std::string(reinterpret_cast<const char*>(lock.token().data), 32));
  const int pttl = std::stoi(run(admin_, {"PTTL", "modem"}));
  EXPECT_GT(pttl, 4500);
  ASSERT_TRUE(lock.release().ok());
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(run(admin_, {"EXISTS", "modem"}), "0");
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld);
}

TEST_F(LockTest, SecondClientIsBusy) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("bus"), ttl(3000)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("bus"), ttl(3000)).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  EXPECT_EQ(lb.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_GT(lb.busy_ttl(), Millis(2000));
  EXPECT_FALSE(lb.held());
  FakeClock unused;
  (void)unused;
  ASSERT_TRUE(la.release().ok());
  EXPECT_TRUE(lb.try_acquire().ok());
  ASSERT_TRUE(lb.release().ok());
}

TEST_F(LockTest, FencingTokensStrictlyIncrease) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("flash"), ttl(3000)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("flash"), ttl(3000)).ok());
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    Lock& l = i % 2 ? la : lb;
    ASSERT_TRUE(l.try_acquire().ok());
    EXPECT_GT(l.fence(), last);
    last = l.fence();
    ASSERT_TRUE(l.release().ok());
  }
  EXPECT_EQ(run(admin_, {"GET", "{flash}:fence"}), std::to_string(last));
}

TEST_F(LockTest, FencingTokenAbove32Bits) {
  ASSERT_EQ(run(admin_, {"SET", "{big}:fence", "4294967300"}), "OK");
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("big"), ttl(1000)).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  EXPECT_EQ(l.fence(), 4294967301ull);
  ASSERT_TRUE(l.release().ok());
}

TEST_F(LockTest, TtlAbove32BitsOfMilliseconds) {
  // 30 days in ms is above 2^31: must survive 32-bit long/time_t targets.
  const int64_t month_ms = 30LL * 24 * 3600 * 1000;
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("long"), ttl(month_ms)).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << a_.last_error();
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", "long"})), month_ms - 60000);
  EXPECT_GT(l.remaining(), Millis(month_ms) - Millis(month_ms / 100) - Millis(60000));
  ASSERT_TRUE(l.extend(Millis(month_ms), ExtendMode::kAdd).ok());
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", "long"})), 2 * month_ms - 60000);
  ASSERT_TRUE(l.release().ok());
}

// Added TTLs stack on the server past what one extend may ask: still a
// success, claimed for no more than two kMaxTtl.
TEST_F(LockTest, AddedTtlsBeyondTwiceTheLongestStayHeld) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("years"), ttl(kMaxTtl.count())).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << a_.last_error();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(l.extend(kMaxTtl, ExtendMode::kAdd).ok()) << i << ": " << a_.last_error();
  }
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", "years"})), 3 * kMaxTtl.count());
  EXPECT_GT(l.remaining(), kMaxTtl);
  EXPECT_LE(l.remaining(), 2 * kMaxTtl);
  ASSERT_TRUE(l.release().ok());
}

// A holder whose TTL in ns would overflow (Redis takes centuries) still
// gets the backoff between attempts, not a busy loop.
TEST_F(LockTest, HolderWithACenturiesTtlGetsTheBackoff) {
  ASSERT_EQ(run(admin_, {"SET", "ages", "other", "PX", "9000000000000000"}), "OK");
  LockOptions o = ttl(1000);
  o.retry_min = Millis(10);
  o.retry_max = Millis(20);
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("ages"), o).ok());
  const uint64_t before = a_.stats().commands;
  EXPECT_EQ(l.acquire(Millis(200)).code(), ErrorCode::kBusy);
  EXPECT_LE(a_.stats().commands - before, 25u) << "attempts 10 ms or more apart";
  ASSERT_EQ(run(admin_, {"DEL", "ages"}), "1");
}

TEST_F(LockTest, ExpiredHolderCannotReleaseNewHolder) {
  // The seed scenario: A's lock expires, B acquires, A's release must fail
  // and B must keep the lock.
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("slot"), ttl(100)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("slot"), ttl(5000)).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  ASSERT_TRUE(lb.acquire(Millis(3000)).ok()) << "B waits for A's expiry";
  EXPECT_FALSE(la.held()) << "local validity ran out";
  EXPECT_EQ(la.release().code(), ErrorCode::kNotOwner);
  EXPECT_EQ(run(admin_, {"GET", "slot"}),
            std::string(reinterpret_cast<const char*>(lb.token().data), 32));
  Result<bool> owned = lb.owned();
  ASSERT_TRUE(owned.ok());
  EXPECT_TRUE(owned.value());
  ASSERT_TRUE(lb.release().ok());
}

TEST_F(LockTest, ExtendAddAndReplace) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("ext"), ttl(2000)).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  ASSERT_TRUE(l.extend(Millis(10000), ExtendMode::kAdd).ok());
  EXPECT_GT(std::stoi(run(admin_, {"PTTL", "ext"})), 11000);
  EXPECT_GT(l.remaining(), Millis(11000));
  // kReplace sets max(PTTL, ttl): never shorter (docs/late-requests.md).
  ASSERT_TRUE(l.extend(Millis(3000), ExtendMode::kReplace).ok());
  EXPECT_GT(std::stoi(run(admin_, {"PTTL", "ext"})), 11000);
  EXPECT_GT(l.remaining(), Millis(10000)) << "the server's longer TTL is claimed";
  ASSERT_TRUE(l.extend(Millis(20000), ExtendMode::kReplace).ok());
  const int p = std::stoi(run(admin_, {"PTTL", "ext"}));
  EXPECT_GT(p, 19500);
  EXPECT_LE(p, 20000);
  ASSERT_TRUE(l.renew().ok());
  EXPECT_GT(std::stoi(run(admin_, {"PTTL", "ext"})), 19000) << "renew never shortens either";
  EXPECT_EQ(l.extend(Millis(0)).code(), ErrorCode::kInvalidArgument) << "0 is never a delete";
  EXPECT_EQ(l.extend(Millis(-5)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run(admin_, {"EXISTS", "ext"}), "1");
  ASSERT_TRUE(l.release().ok());
}

TEST_F(LockTest, ExtendAfterExpiryFails) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("short"), ttl(50)).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  SystemClock().sleep_for(Millis(120));
  EXPECT_EQ(l.extend(Millis(1000)).code(), ErrorCode::kNotOwner);
  EXPECT_EQ(l.renew().code(), ErrorCode::kNotHeld) << "token forgotten after not-owner";
  EXPECT_EQ(run(admin_, {"EXISTS", "short"}), "0");
}

TEST_F(LockTest, OwnedAndStatus) {
  Lock l(a_), other(b_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("own"), ttl(4000)).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("own"), ttl(4000)).ok());
  Result<KeyStatus> st = other.status();
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st.value().held);
  ASSERT_TRUE(l.try_acquire().ok());
  st = other.status();
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st.value().held);
  EXPECT_TRUE(st.value().expires);
  EXPECT_GT(st.value().ttl, Millis(3000));
  EXPECT_EQ(other.owned().status().code(), ErrorCode::kNotHeld);
  ASSERT_EQ(run(admin_, {"SET", "own", "someone-else"}), "OK");
  Result<bool> o = l.owned();
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o.value());
  EXPECT_FALSE(l.held());
}

TEST_F(LockTest, BinarySafeKeys) {
  const std::string key("dev 1\r\n\0\xe2\x9c\x93", 10);
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes(key.data(), key.size()), ttl(2000)).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << a_.last_error();
  EXPECT_EQ(run(admin_, {"EXISTS", key}), "1");
  ASSERT_TRUE(l.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", key}), "0");
}

TEST_F(LockTest, InvalidArguments) {
  Lock l(a_);
  EXPECT_EQ(l.init(Bytes()).code(), ErrorCode::kInvalidArgument);
  const std::string big(kMaxKeyLen + 1, 'k');
  EXPECT_EQ(l.init(Bytes(big.data(), big.size())).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(l.init(Bytes::from_cstr("k"), ttl(0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(l.init(Bytes::from_cstr("k"), ttl(kMaxTtl.count() + 1)).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kInvalidArgument) << "not initialised";
  LockOptions o = ttl(1000);
  o.retry_max = kMaxTtl + Nanos(1);  // a delay past it would overflow a deadline
  EXPECT_EQ(l.init(Bytes::from_cstr("k"), o).code(), ErrorCode::kInvalidArgument);
  o.retry_max = kMaxTtl;
  EXPECT_TRUE(l.init(Bytes::from_cstr("k"), o).ok());
  const std::string max(kMaxKeyLen - 8, 'k');  // room for "{…}:fence"
  EXPECT_TRUE(l.init(Bytes(max.data(), max.size())).ok());
}

TEST_F(LockTest, WaitTimesOutAsBusy) {
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("wait"), ttl(10000)).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("wait"), ttl(10000)).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  SystemClock clock;
  const TimePoint t0 = clock.now();
  EXPECT_EQ(lb.acquire(Millis(200)).code(), ErrorCode::kBusy);
  const Nanos took = clock.now() - t0;
  EXPECT_GE(took, Millis(200));
  EXPECT_LT(took, Millis(200) + Millis(400) * test::slowdown());
  const int commands = static_cast<int>(b_.stats().commands);
  // Busy attempt, BLPOP capped at the wait, last attempt (the wake signal
  // replaces polling; a jittered fallback may split the BLPOP once more).
  EXPECT_LE(commands, 5) << "blocked on the release signal, not polling";
  ASSERT_TRUE(la.release().ok());
}

TEST_F(LockTest, WaitTimesOutAsBusyWithBackoff) {
  LockOptions o = ttl(10000);
  o.wake_on_release = false;
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("wait2"), o).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("wait2"), o).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  SystemClock clock;
  const TimePoint t0 = clock.now();
  EXPECT_EQ(lb.acquire(Millis(200)).code(), ErrorCode::kBusy);
  const Nanos took = clock.now() - t0;
  EXPECT_GE(took, Millis(200));
  EXPECT_LT(took, Millis(200) + Millis(400) * test::slowdown());
  const int commands = static_cast<int>(b_.stats().commands);
  EXPECT_GT(commands, 3) << "polls when told not to block";
  EXPECT_LT(commands, 60) << "backoff, not a busy loop";
  ASSERT_TRUE(la.release().ok());
}

TEST(LockValidity, ExactArithmeticOnFakeClock) {
  // With a fake clock, time moves only when we say: the validity must be
  // exactly ttl - drift - elapsed, where drift = ttl * 1% + 2 ms.
  RedisServer server;
  ASSERT_TRUE(server.start());
  FakeClock clock;
  Connection c;
  ASSERT_TRUE(test::open(c, server.url(), &clock));
  Lock l(c);
  LockOptions o;
  o.ttl = Millis(10000);
  ASSERT_TRUE(l.init(Bytes::from_cstr("fake"), o).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  EXPECT_EQ(l.remaining(), Millis(10000 - 100 - 2));
  clock.advance(Millis(9000));
  EXPECT_EQ(l.remaining(), Millis(898));
  clock.advance(Millis(898));
  EXPECT_EQ(l.remaining(), Nanos::zero());
  EXPECT_FALSE(l.held()) << "locally expired although the server key may live on";
  // Longer than the server's TTL left (about 10 s of real time): set as asked.
  ASSERT_TRUE(l.extend(Millis(20000), ExtendMode::kReplace).ok());
  EXPECT_EQ(l.remaining(), Millis(20000 - 200 - 2));
  ASSERT_TRUE(l.release().ok());
}

TEST_F(LockTest, GuardReleasesOnScopeExit) {
  Lock l(a_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("guarded"), ttl(5000)).ok());
  {
    ASSERT_TRUE(l.acquire(Millis(100)).ok());
    LockGuard guard(l);
    EXPECT_EQ(run(admin_, {"EXISTS", "guarded"}), "1");
  }
  EXPECT_EQ(run(admin_, {"EXISTS", "guarded"}), "0");
}

struct Captured {
  int calls = 0;
  ErrorCode code = ErrorCode::kOk;
};

TEST_F(LockTest, GuardReportsFailedRelease) {
  Lock l(a_);
  Captured cap;
  ASSERT_TRUE(l.init(Bytes::from_cstr("guarded2"), ttl(5000)).ok());
  {
    ASSERT_TRUE(l.try_acquire().ok());
    LockGuard guard(
        l,
        [](Status s, const char*, void* ctx) {
          auto* c = static_cast<Captured*>(ctx);
          ++c->calls;
          c->code = s.code();
        },
        &cap);
    ASSERT_EQ(run(admin_, {"SET", "guarded2", "thief"}), "OK");
  }
  EXPECT_EQ(cap.calls, 1);
  EXPECT_EQ(cap.code, ErrorCode::kNotOwner);
  EXPECT_EQ(run(admin_, {"GET", "guarded2"}), "thief") << "other holder left alone";
}

TEST_F(LockTest, AdoptByToken) {
  Lock l(a_), adopter(b_);
  ASSERT_TRUE(l.init(Bytes::from_cstr("handover"), ttl(5000)).ok());
  ASSERT_TRUE(adopter.init(Bytes::from_cstr("handover"), ttl(5000)).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  ASSERT_TRUE(adopter.adopt(l.token()).ok());
  EXPECT_TRUE(adopter.extend(Millis(1000)).ok());
  EXPECT_TRUE(adopter.release().ok());
  EXPECT_EQ(l.release().code(), ErrorCode::kNotOwner);
}

}  // namespace
}  // namespace edgelock
