// RateLimiter over the scripted fake transport, on a FakeClock, with limit
// 1 (a cooldown) and limit 2: an admission, a refusal, the local hint, an
// answer that comes too late, a lost or garbled answer. The invariant every case checks: an
// attempt is allowed only from a checked answer that still holds on our
// clock, and the local hint only ever refuses.
#include <gtest/gtest.h>

#include <string>

#include "../../src/lease/rate_scripts.h"
#include "../support/fake_clock.h"
#include "../support/fake_transport.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::FakeTransport;
using test::resp_int;
using test::resp_ints;

constexpr Millis kWindow{1000};
// window * drift_factor (0.01) + 2 ms.
constexpr Millis kDrift{12};

bool runs(const std::vector<std::string>& request, const Script& script) {
  return request.size() > 1 && request[0] == "EVALSHA" &&
         request[1] == std::string(script.sha1, 40);
}

class RateLimiterFake : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(test::setup_fake(conn_, server_, clock_).ok()); }
  size_t sent() const { return server_.requests().size(); }

  FakeClock clock_;
  FakeTransport server_{clock_};
  Connection conn_;
};

// --- Limit 1: a cooldown.

class RateLimiterCooldownFake : public RateLimiterFake {
 protected:
  void SetUp() override {
    RateLimiterFake::SetUp();
    RateLimiterOptions o;
    o.window = kWindow;
    ASSERT_TRUE(cooldown_.init(Bytes::from_cstr("modem-reset"), o).ok());
  }
  RateLimiter cooldown_{conn_};
};

TEST_F(RateLimiterCooldownFake, AdmissionThenLocalRefusalUntilTheWindowSurelyEnded) {
  const TimePoint t0 = clock_.now();
  server_.reply(resp_ints({1, 0, 1000}), Millis(5));
  Admission a;
  ASSERT_TRUE(cooldown_.try_acquire(&a).ok()) << conn_.last_error();
  EXPECT_TRUE(a.allowed);
  EXPECT_FALSE(a.local);
  EXPECT_EQ(a.retry_after, kWindow);
  ASSERT_EQ(sent(), 1u);
  EXPECT_TRUE(runs(server_.requests()[0], detail::kRateScript));
  const std::vector<std::string> limit_one = {
      "EVALSHA", std::string(detail::kRateScript.sha1, 40), "1", "modem-reset", "1", "1000"};
  EXPECT_EQ(server_.requests()[0], limit_one) << "limit 1, the window in ms";

  Admission b;
  EXPECT_EQ(cooldown_.try_acquire(&b).code(), ErrorCode::kBusy);
  EXPECT_FALSE(b.allowed);
  EXPECT_TRUE(b.local);
  EXPECT_EQ(sent(), 1u) << "the hint refuses without a round trip";

  // The key lives at least until t0 + window - drift on our clock; past
  // that, only the server can say.
  clock_.advance(t0 + kWindow - kDrift - clock_.now());
  server_.reply(resp_ints({0, 0, 3}));
  Admission c;
  EXPECT_EQ(cooldown_.try_acquire(&c).code(), ErrorCode::kBusy);
  EXPECT_FALSE(c.local);
  EXPECT_EQ(sent(), 2u);
  EXPECT_EQ(c.retry_after, Millis(3));
}

TEST_F(RateLimiterCooldownFake, RefusalSaysHowLongAndAllowsNothing) {
  server_.reply(resp_ints({0, 0, 400}));
  Admission a;
  EXPECT_EQ(cooldown_.try_acquire(&a).code(), ErrorCode::kBusy);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_after, Millis(400));
}

TEST_F(RateLimiterCooldownFake, AdmissionAnsweredAfterTheWindowIsExpired) {
  server_.reply(resp_ints({1, 0, 1000}), kWindow);  // the answer took the whole window
  Admission a;
  EXPECT_EQ(cooldown_.try_acquire(&a).code(), ErrorCode::kExpired);
  EXPECT_FALSE(a.allowed) << "another device's entry may already be allowed";
}

TEST_F(RateLimiterCooldownFake, LostAnswerAllowsNothingAndSetsNoHint) {
  server_.lose_reply();
  Admission a;
  const Status s = cooldown_.try_acquire(&a);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_FALSE(a.allowed);
  server_.reply(resp_ints({1, 0, 1000}));
  EXPECT_TRUE(cooldown_.try_acquire(&a).ok()) << "an unknown answer refuses nothing locally";
  EXPECT_EQ(sent(), 2u);
}

TEST_F(RateLimiterCooldownFake, GarbledAnswerIsAProtocolError) {
  server_.reply(resp_int(1));
  Admission a;
  EXPECT_EQ(cooldown_.try_acquire(&a).code(), ErrorCode::kProtocol);
  EXPECT_FALSE(a.allowed);
  server_.reply(resp_ints({1, 0, -1}));
  EXPECT_EQ(cooldown_.try_acquire(&a).code(), ErrorCode::kProtocol) << "a key without a TTL";
  EXPECT_FALSE(a.allowed);
}

TEST_F(RateLimiterCooldownFake, AcquireWaitsWhatTheServerSaid) {
  server_.reply(resp_ints({0, 0, 300})).reply(resp_ints({1, 0, 1000}));
  const TimePoint t0 = clock_.now();
  Admission a;
  ASSERT_TRUE(cooldown_.acquire(Millis(2000), &a).ok()) << conn_.last_error();
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(sent(), 2u) << "one refusal, one entry: no polling in between";
  EXPECT_GE(clock_.now() - t0, Millis(300));
}

TEST_F(RateLimiterCooldownFake, AcquireGivesUpAtItsWait) {
  server_.reply(resp_ints({0, 0, 5000}));
  Admission a;
  EXPECT_EQ(cooldown_.acquire(Millis(500), &a).code(), ErrorCode::kBusy);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(sent(), 1u) << "the pause ended with the wait, not with another request";
}

// --- Limit 2: a quota.

class RateLimiterQuotaFake : public RateLimiterFake {
 protected:
  void SetUp() override {
    RateLimiterFake::SetUp();
    RateLimiterOptions o;
    o.limit = 2;
    o.window = kWindow;
    ASSERT_TRUE(quota_.init(Bytes::from_cstr("uplink-mb"), o).ok());
  }
  RateLimiter quota_{conn_};
};

TEST_F(RateLimiterQuotaFake, CountsDownThenRefusesLocally) {
  server_.reply(resp_ints({1, 1, 1000})).reply(resp_ints({1, 0, 990}));
  Admission a;
  ASSERT_TRUE(quota_.try_acquire(&a).ok()) << conn_.last_error();
  EXPECT_EQ(a.remaining, 1);
  EXPECT_EQ(a.retry_after, Millis(0));
  EXPECT_TRUE(runs(server_.requests()[0], detail::kRateScript));
  ASSERT_TRUE(quota_.try_acquire(&a).ok());
  EXPECT_EQ(a.remaining, 0);
  EXPECT_EQ(a.retry_after, Millis(990));
  EXPECT_EQ(quota_.try_acquire(&a).code(), ErrorCode::kBusy);
  EXPECT_TRUE(a.local);
  EXPECT_EQ(sent(), 2u);
}

TEST_F(RateLimiterQuotaFake, UsedUpWindowAsksTheServerOnceItSurelyEnded) {
  const TimePoint t0 = clock_.now();
  server_.reply(resp_ints({1, 0, 1000}));
  Admission a;
  ASSERT_TRUE(quota_.try_acquire(&a).ok());
  clock_.advance(t0 + kWindow - kDrift - Millis(1) - clock_.now());
  EXPECT_EQ(quota_.try_acquire(&a).code(), ErrorCode::kBusy);
  EXPECT_TRUE(a.local) << "the window surely lasts: refused here";
  clock_.advance(Millis(1));
  server_.reply(resp_ints({1, 1, 1000}));
  EXPECT_TRUE(quota_.try_acquire(&a).ok()) << "past it only the server can say";
  EXPECT_EQ(sent(), 2u);
}

TEST_F(RateLimiterQuotaFake, AdmissionAnsweredAfterTheWindowIsExpired) {
  server_.reply(resp_ints({1, 1, 1000}), kWindow);
  Admission a;
  EXPECT_EQ(quota_.try_acquire(&a).code(), ErrorCode::kExpired);
  EXPECT_FALSE(a.allowed);
}

}  // namespace
}  // namespace edgelock
