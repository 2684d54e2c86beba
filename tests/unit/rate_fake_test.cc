// The rate limiters (Cooldown, Quota) over the scripted fake transport, on
// a FakeClock: an entry, a refusal, the local hint, an answer that comes
// too late, a lost or garbled answer. The invariant every case checks: an
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

constexpr Millis kPeriod{1000};
// period * drift_factor (0.01) + 2 ms.
constexpr Millis kDrift{12};

bool runs(const std::vector<std::string>& request, const Script& script) {
  return request.size() > 1 && request[0] == "EVALSHA" &&
         request[1] == std::string(script.sha1, 40);
}

class FakeRate : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(test::setup_fake(conn_, server_, clock_).ok()); }
  size_t sent() const { return server_.requests().size(); }

  FakeClock clock_;
  FakeTransport server_{clock_};
  Connection conn_;
};

// --- Cooldown.

class FakeCooldown : public FakeRate {
 protected:
  void SetUp() override {
    FakeRate::SetUp();
    CooldownOptions o;
    o.period = kPeriod;
    ASSERT_TRUE(cooldown_.init(Bytes::from_cstr("modem-reset"), o).ok());
  }
  Cooldown cooldown_{conn_};
};

TEST_F(FakeCooldown, EntryThenLocalRefusalUntilThePeriodSurelyEnded) {
  const TimePoint t0 = clock_.now();
  server_.reply(resp_ints({1, 0, 1000}), Millis(5));
  Admission a;
  ASSERT_TRUE(cooldown_.try_enter(&a).ok()) << conn_.last_error();
  EXPECT_TRUE(a.allowed);
  EXPECT_FALSE(a.local);
  EXPECT_EQ(a.retry_after, kPeriod);
  ASSERT_EQ(sent(), 1u);
  EXPECT_TRUE(runs(server_.requests()[0], detail::kCooldownScript));

  Admission b;
  EXPECT_EQ(cooldown_.try_enter(&b).code(), ErrorCode::kBusy);
  EXPECT_FALSE(b.allowed);
  EXPECT_TRUE(b.local);
  EXPECT_EQ(sent(), 1u) << "the hint refuses without a round trip";

  // The key lives at least until t0 + period - drift on our clock; past
  // that, only the server can say.
  clock_.advance(t0 + kPeriod - kDrift - clock_.now());
  server_.reply(resp_ints({0, 0, 3}));
  Admission c;
  EXPECT_EQ(cooldown_.try_enter(&c).code(), ErrorCode::kBusy);
  EXPECT_FALSE(c.local);
  EXPECT_EQ(sent(), 2u);
  EXPECT_EQ(c.retry_after, Millis(3));
}

TEST_F(FakeCooldown, RefusalSaysHowLongAndAllowsNothing) {
  server_.reply(resp_ints({0, 0, 400}));
  Admission a;
  EXPECT_EQ(cooldown_.try_enter(&a).code(), ErrorCode::kBusy);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.retry_after, Millis(400));
}

TEST_F(FakeCooldown, EntryAnsweredAfterThePeriodIsExpired) {
  server_.reply(resp_ints({1, 0, 1000}), kPeriod);  // the answer took the whole period
  Admission a;
  EXPECT_EQ(cooldown_.try_enter(&a).code(), ErrorCode::kExpired);
  EXPECT_FALSE(a.allowed) << "another device's entry may already be allowed";
}

TEST_F(FakeCooldown, LostAnswerAllowsNothingAndSetsNoHint) {
  server_.lose_reply();
  Admission a;
  const Status s = cooldown_.try_enter(&a);
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_FALSE(a.allowed);
  server_.reply(resp_ints({1, 0, 1000}));
  EXPECT_TRUE(cooldown_.try_enter(&a).ok()) << "an unknown answer refuses nothing locally";
  EXPECT_EQ(sent(), 2u);
}

TEST_F(FakeCooldown, GarbledAnswerIsAProtocolError) {
  server_.reply(resp_int(1));
  Admission a;
  EXPECT_EQ(cooldown_.try_enter(&a).code(), ErrorCode::kProtocol);
  EXPECT_FALSE(a.allowed);
  server_.reply(resp_ints({1, 0, -1}));
  EXPECT_EQ(cooldown_.try_enter(&a).code(), ErrorCode::kProtocol) << "a key without a TTL";
  EXPECT_FALSE(a.allowed);
}

TEST_F(FakeCooldown, EnterWaitsWhatTheServerSaid) {
  server_.reply(resp_ints({0, 0, 300})).reply(resp_ints({1, 0, 1000}));
  const TimePoint t0 = clock_.now();
  Admission a;
  ASSERT_TRUE(cooldown_.enter(Millis(2000), &a).ok()) << conn_.last_error();
  EXPECT_TRUE(a.allowed);
  EXPECT_EQ(sent(), 2u) << "one refusal, one entry: no polling in between";
  EXPECT_GE(clock_.now() - t0, Millis(300));
}

TEST_F(FakeCooldown, EnterGivesUpAtItsWait) {
  server_.reply(resp_ints({0, 0, 5000}));
  Admission a;
  EXPECT_EQ(cooldown_.enter(Millis(500), &a).code(), ErrorCode::kBusy);
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(sent(), 1u) << "the pause ended with the wait, not with another request";
}

// --- Quota.

class FakeQuota : public FakeRate {
 protected:
  void SetUp() override {
    FakeRate::SetUp();
    QuotaOptions o;
    o.limit = 2;
    o.window = kPeriod;
    ASSERT_TRUE(quota_.init(Bytes::from_cstr("uplink-mb"), o).ok());
  }
  Quota quota_{conn_};
};

TEST_F(FakeQuota, CountsDownThenRefusesLocally) {
  server_.reply(resp_ints({1, 1, 1000})).reply(resp_ints({1, 0, 990}));
  Admission a;
  ASSERT_TRUE(quota_.try_take(&a).ok()) << conn_.last_error();
  EXPECT_EQ(a.remaining, 1);
  EXPECT_EQ(a.retry_after, Millis(0));
  EXPECT_TRUE(runs(server_.requests()[0], detail::kQuotaScript));
  ASSERT_TRUE(quota_.try_take(&a).ok());
  EXPECT_EQ(a.remaining, 0);
  EXPECT_EQ(a.retry_after, Millis(990));
  EXPECT_EQ(quota_.try_take(&a).code(), ErrorCode::kBusy);
  EXPECT_TRUE(a.local);
  EXPECT_EQ(sent(), 2u);
}

TEST_F(FakeQuota, UsedUpWindowAsksTheServerOnceItSurelyEnded) {
  const TimePoint t0 = clock_.now();
  server_.reply(resp_ints({1, 0, 1000}));
  Admission a;
  ASSERT_TRUE(quota_.try_take(&a).ok());
  clock_.advance(t0 + kPeriod - kDrift - Millis(1) - clock_.now());
  EXPECT_EQ(quota_.try_take(&a).code(), ErrorCode::kBusy);
  EXPECT_TRUE(a.local) << "the window surely lasts: refused here";
  clock_.advance(Millis(1));
  server_.reply(resp_ints({1, 1, 1000}));
  EXPECT_TRUE(quota_.try_take(&a).ok()) << "past it only the server can say";
  EXPECT_EQ(sent(), 2u);
}

TEST_F(FakeQuota, TakeAnsweredAfterTheWindowIsExpired) {
  server_.reply(resp_ints({1, 1, 1000}), kPeriod);
  Admission a;
  EXPECT_EQ(quota_.try_take(&a).code(), ErrorCode::kExpired);
  EXPECT_FALSE(a.allowed);
}

}  // namespace
}  // namespace edgelock
