// The single-server lease state machines (Lock, ReentrantLock, Semaphore)
// over the scripted fake transport, on a FakeClock: grants, refusals, late
// grants, lost replies. The invariant every case checks: a handle never
// claims more than the server may hold, and keeps what it needs (token,
// permit id, levels) to clean up what the server may still hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "../../src/primitives/lock_scripts.h"
#include "../../src/primitives/reentrant_scripts.h"
#include "../../src/primitives/semaphore_scripts.h"
#include "../support/fake_clock.h"
#include "../support/fake_transport.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::FakeTransport;
using test::resp_int;
using test::resp_ints;

constexpr Millis kTtl{1000};
// ttl * drift_factor (0.01) + 2 ms.
constexpr Millis kDrift{12};

std::string text(Bytes b) { return std::string(reinterpret_cast<const char*>(b.data), b.size); }

bool has_word(const std::vector<std::string>& words, const std::string& w) {
  return std::find(words.begin(), words.end(), w) != words.end();
}

bool runs(const std::vector<std::string>& request, const Script& script) {
  return request.size() > 1 && request[0] == "EVALSHA" &&
         request[1] == std::string(script.sha1, 40);
}

class FakeServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(test::setup_fake(conn_, server_, clock_).ok()); }
  const std::vector<std::string>& request(size_t i) const { return server_.requests().at(i); }

  FakeClock clock_;
  FakeTransport server_{clock_};
  Connection conn_;
};

// --- Lock.

class FakeLock : public FakeServerTest {
 protected:
  void SetUp() override {
    FakeServerTest::SetUp();
    LockOptions o;
    o.ttl = kTtl;
    ASSERT_TRUE(lock_.init(Bytes::from_cstr("pump"), o).ok());
  }
  Lock lock_{conn_};
};

TEST_F(FakeLock, GrantCountsValidityFromBeforeTheRequest) {
  server_.reply(resp_int(7), Millis(5));
  ASSERT_TRUE(lock_.try_acquire().ok()) << conn_.last_error();
  EXPECT_EQ(lock_.fence(), 7u);
  EXPECT_EQ(lock_.remaining(), kTtl - kDrift - Millis(5));
  EXPECT_TRUE(runs(request(0), detail::kAcquireScript));
  EXPECT_TRUE(has_word(request(0), text(lock_.token())));
}

TEST_F(FakeLock, BusyClaimsNothing) {
  server_.reply(resp_int(-1500));
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_FALSE(lock_.held());
  EXPECT_EQ(lock_.fence(), 0u);
  EXPECT_EQ(lock_.busy_ttl(), Millis(1500));
}

TEST_F(FakeLock, LateGrantIsExpiredAndHandedBack) {
  server_.reply(resp_int(7), kTtl).reply(resp_int(1));  // granted after its validity
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kExpired);
  EXPECT_FALSE(lock_.held());
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_TRUE(runs(request(1), detail::kReleaseScript)) << "handed back at once";
  EXPECT_TRUE(has_word(request(1), text(lock_.token())));
}

TEST_F(FakeLock, LostGrantKeepsTheTokenForRelease) {
  server_.lose_reply();
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(lock_.held()) << "an unknown outcome is never a claim";
  const std::string token = text(lock_.token());
  server_.reply(resp_int(1));
  EXPECT_TRUE(lock_.release().ok()) << conn_.last_error();
  EXPECT_TRUE(runs(request(1), detail::kReleaseScript));
  EXPECT_TRUE(has_word(request(1), token)) << "the grant may have landed: released with its token";
}

TEST_F(FakeLock, UnknownReleaseStopsTheClaimAndCanBeRetried) {
  server_.reply(resp_int(3));
  ASSERT_TRUE(lock_.try_acquire().ok());
  server_.lose_reply();
  EXPECT_EQ(lock_.release().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(lock_.held()) << "the delete may have run: not ours to use";
  server_.reply(resp_int(0));
  EXPECT_EQ(lock_.release().code(), ErrorCode::kNotOwner) << "the first one had landed";
  EXPECT_TRUE(has_word(request(2), text(lock_.token())));
  EXPECT_EQ(lock_.release().code(), ErrorCode::kNotHeld);
}

TEST_F(FakeLock, ExtendWhoseReplyIsLostNeverOutlivesTheOldValidity) {
  server_.reply(resp_int(3));
  ASSERT_TRUE(lock_.try_acquire().ok());
  clock_.advance(Millis(500));
  server_.lose_reply();
  EXPECT_NE(lock_.extend(kTtl).code(), ErrorCode::kOk);
  EXPECT_FALSE(lock_.held()) << "the renewal waited until the validity it renews ended";
}

TEST_F(FakeLock, ExtendGrantCountsFromItsStart) {
  server_.reply(resp_int(3));
  ASSERT_TRUE(lock_.try_acquire().ok());
  clock_.advance(Millis(500));
  server_.reply(resp_int(1400), Millis(20));  // kAdd: 500 left + 1000 - the round trip
  ASSERT_TRUE(lock_.extend(kTtl).ok()) << conn_.last_error();
  EXPECT_EQ(lock_.remaining(), Millis(1400) - Millis(16) - Millis(20));
}

// --- ReentrantLock.

class FakeReentrant : public FakeServerTest {
 protected:
  void SetUp() override {
    FakeServerTest::SetUp();
    ReentrantLockOptions o;
    o.ttl = kTtl;
    ASSERT_TRUE(lock_.init(Bytes::from_cstr("cfg"), o).ok());
  }
  ReentrantLock lock_{conn_};
};

TEST_F(FakeReentrant, GrantAndReentry) {
  server_.reply(resp_ints({1, 9})).reply(resp_ints({2, 9}));
  ASSERT_TRUE(lock_.try_acquire().ok());
  ASSERT_TRUE(lock_.try_acquire().ok());
  EXPECT_EQ(lock_.depth(), 2u);
  EXPECT_EQ(lock_.fence(), 9u);
  EXPECT_TRUE(runs(request(1), detail::kReentrantAcquireScript));
}

TEST_F(FakeReentrant, BusyAndNotOwner) {
  server_.reply(resp_ints({0, 700}));
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(lock_.busy_ttl(), Millis(700));
  EXPECT_EQ(lock_.depth(), 0u);
  server_.reply(resp_ints({-1, 0}));
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kNotOwner);
  EXPECT_FALSE(lock_.held());
}

TEST_F(FakeReentrant, LateLevelIsExpiredAndDropped) {
  server_.reply(resp_ints({1, 4}), kTtl).reply(resp_int(0));
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kExpired);
  EXPECT_EQ(lock_.depth(), 0u);
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_TRUE(runs(request(1), detail::kReentrantReleaseScript));
}

TEST_F(FakeReentrant, LostLevelIsNotCountedButReleased) {
  server_.lose_reply();
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kTimeout);
  EXPECT_EQ(lock_.depth(), 0u);
  EXPECT_FALSE(lock_.held());
  server_.reply(resp_int(0));
  EXPECT_TRUE(lock_.release().ok()) << "the level that may have landed is removed";
  EXPECT_TRUE(runs(request(1), detail::kReentrantReleaseScript));
  EXPECT_EQ(lock_.release().code(), ErrorCode::kNotHeld);
}

// --- Semaphore.

class FakeSemaphore : public FakeServerTest {
 protected:
  void SetUp() override {
    FakeServerTest::SetUp();
    SemaphoreOptions o;
    o.permits = 2;
    o.ttl = kTtl;
    ASSERT_TRUE(sem_.init(Bytes::from_cstr("modems"), o).ok());
  }
  Semaphore sem_{conn_};
  Permit permit_;
};

TEST_F(FakeSemaphore, GrantAndBusy) {
  server_.reply(resp_ints({1, 1}), Millis(4));
  ASSERT_TRUE(sem_.try_acquire(&permit_).ok()) << conn_.last_error();
  EXPECT_EQ(permit_.remaining(), kTtl - kDrift - Millis(4));
  Permit other;
  server_.reply(resp_ints({0, 650}));
  EXPECT_EQ(sem_.try_acquire(&other).code(), ErrorCode::kBusy);
  EXPECT_EQ(other.remaining(), Nanos::zero());
  EXPECT_EQ(sem_.busy_ttl(), Millis(650));
}

TEST_F(FakeSemaphore, LateGrantIsHandedBackWithItsId) {
  server_.reply(resp_ints({1, 1}), kTtl).reply(resp_int(1));
  EXPECT_EQ(sem_.try_acquire(&permit_).code(), ErrorCode::kExpired);
  EXPECT_EQ(permit_.remaining(), Nanos::zero());
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_TRUE(runs(request(1), detail::kSemReleaseScript));
  EXPECT_TRUE(has_word(request(1), text(permit_.token())));
}

TEST_F(FakeSemaphore, LostGrantKeepsTheIdForRelease) {
  server_.lose_reply();
  EXPECT_EQ(sem_.try_acquire(&permit_).code(), ErrorCode::kTimeout);
  EXPECT_EQ(permit_.remaining(), Nanos::zero());
  const std::string id = text(permit_.token());
  ASSERT_FALSE(id.empty());
  server_.reply(resp_int(1));
  EXPECT_TRUE(permit_.release().ok());
  EXPECT_TRUE(has_word(request(1), id));
}

TEST_F(FakeSemaphore, UnknownExtendShortensTheClaim) {
  server_.reply(resp_ints({1, 1}));
  ASSERT_TRUE(sem_.try_acquire(&permit_).ok());
  clock_.advance(Millis(900));
  server_.reset_after(Millis(10));  // the extend to 50 ms may have run
  EXPECT_EQ(permit_.extend(Millis(50)).code(), ErrorCode::kConnectionClosed);
  EXPECT_LE(permit_.remaining(), Millis(50)) << "no more than the shorter TTL may have left";
}

}  // namespace
}  // namespace edgelock
