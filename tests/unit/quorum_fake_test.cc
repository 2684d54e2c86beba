// More lease state machines over the scripted fake transport, on a
// FakeClock: QuorumLock (one fake server each) and the lease keeper
// (RateLimiter: rate_fake_test.cc). Each case checks that nothing
// is claimed that the servers may not hold, and that what may be held is
// cleaned up.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "../../src/primitives/lock_scripts.h"
#include "../support/fake_clock.h"
#include "../support/fake_transport.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::FakeTransport;
using test::resp_int;
using test::resp_ints;

constexpr Millis kTtl{1000};

// By SHA-1, or by body (a release, or a request queued behind another).
bool runs(const std::vector<std::string>& request, const Script& script) {
  if (request.size() < 2) return false;
  return (request[0] == "EVALSHA" && request[1] == std::string(script.sha1, 40)) ||
         (request[0] == "EVAL" && request[1] == std::string(script.body, script.len));
}

bool ran(const FakeTransport& server, const Script& script, const std::string& word) {
  for (const auto& r : server.requests()) {
    if (runs(r, script) && std::find(r.begin(), r.end(), word) != r.end()) return true;
  }
  return false;
}

// --- QuorumLock over three fake servers.

class FakeQuorum : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      servers_[i].reset(new FakeTransport(clock_));
      ASSERT_TRUE(test::setup_fake(conns_[i], *servers_[i], clock_).ok());
      ptrs_[i] = &conns_[i];
    }
    QuorumOptions o;
    o.ttl = kTtl;
    o.server_timeout = Millis(50);
    ASSERT_TRUE(lock_.init(ptrs_, 3, Bytes::from_cstr("valve"), o).ok());
  }
  FakeTransport& server(int i) { return *servers_[i]; }
  std::string token() const {
    return std::string(reinterpret_cast<const char*>(lock_.token().data), lock_.token().size);
  }

  FakeClock clock_;
  std::unique_ptr<FakeTransport> servers_[3];
  Connection conns_[3];
  Connection* ptrs_[3] = {};
  QuorumLock lock_;
};

// The proposal a request carried (ARGV[3] of the quorum acquire).
std::string proposal(const std::vector<std::string>& request) {
  return runs(request, detail::kQuorumAcquireScript) && request.size() == 8 ? request[7] : "";
}

TEST_F(FakeQuorum, MajorityGrantsWithTheHighestFence) {
  server(0).reply(resp_int(5), Millis(2)).reply(resp_int(1));
  server(1).reply(resp_int(7), Millis(3)).reply(resp_int(1));
  server(2).reply(resp_int(6), Millis(4)).reply(resp_int(1));
  ASSERT_TRUE(lock_.try_acquire().ok()) << lock_.last_error();
  EXPECT_EQ(proposal(server(0).requests().at(0)), "1") << "a fresh client knows nothing";
  EXPECT_EQ(lock_.fence(), 7u);
  EXPECT_TRUE(lock_.held());
  EXPECT_LE(lock_.remaining(), kTtl - Millis(12) - Millis(3)) << "counted from before the round";
  // Only server 1 returned 7: the servers that returned less are raised.
  EXPECT_TRUE(runs(server(0).requests().at(1), detail::kFenceRaiseScript));
  EXPECT_EQ(server(0).requests().at(1).back(), "7");
  EXPECT_EQ(server(1).requests().size(), 1u) << "server 1 holds the fence already";
}

TEST_F(FakeQuorum, AMajorityOnTheFenceIsFinalAfterOneRound) {
  server(0).reply(resp_int(9), Millis(2));
  server(1).reply(resp_int(9), Millis(3));
  server(2).reply(resp_int(8), Millis(4));
  ASSERT_TRUE(lock_.try_acquire().ok()) << lock_.last_error();
  EXPECT_EQ(lock_.fence(), 9u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(ran(server(i), detail::kFenceRaiseScript, "9")) << "no write-back to server " << i;
  }
  EXPECT_LE(lock_.remaining(), kTtl - Millis(12) - Millis(3));
  // The next acquire proposes one above the highest counter seen.
  server(0).reply(resp_int(1));
  server(1).reply(resp_int(1));
  server(2).reply(resp_int(1));
  ASSERT_TRUE(lock_.release().ok());
  server(0).reply(resp_int(10));
  server(1).reply(resp_int(10));
  server(2).reply(resp_int(10));
  ASSERT_TRUE(lock_.try_acquire().ok()) << lock_.last_error();
  EXPECT_EQ(proposal(server(0).requests().back()), "10");
  EXPECT_EQ(lock_.fence(), 10u);
}

TEST_F(FakeQuorum, BusyRepliesTellTheCounterForTheNextProposal) {
  server(0).reply(resp_int(3));
  server(1).reply(resp_ints({-800, 41}));
  server(2).reply(resp_ints({-600, 40}));
  server(0).reply(resp_int(1));  // the clean-up release
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(lock_.busy_ttl(), Millis(600));
  server(0).reply(resp_int(42));
  server(1).reply(resp_int(42));
  server(2).reply(resp_int(42));
  ASSERT_TRUE(lock_.try_acquire().ok()) << lock_.last_error();
  EXPECT_EQ(proposal(server(0).requests().back()), "42") << "one above the busy counters";
  EXPECT_EQ(lock_.fence(), 42u);
}

TEST_F(FakeQuorum, AWriteBackWithoutAMajorityIsNoGrant) {
  server(0).reply(resp_int(5), Millis(2)).reply(resp_int(0));
  server(1).reply(resp_int(7), Millis(3)).reply(resp_int(1));
  server(2).reply(resp_ints({-500, 7}), Millis(4));
  const Status s = lock_.try_acquire();
  EXPECT_EQ(s.code(), ErrorCode::kNoQuorum) << s.to_string();
  EXPECT_FALSE(lock_.held());
  EXPECT_EQ(lock_.fence(), 0u);
}

TEST_F(FakeQuorum, BusyMajorityClaimsNothingAndCleansUp) {
  server(0).reply(resp_int(5)).reply(resp_int(1));
  server(1).reply(resp_ints({-800, 5}));
  server(2).reply(resp_ints({-600, 5}));
  EXPECT_EQ(lock_.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_FALSE(lock_.held());
  EXPECT_EQ(lock_.fence(), 0u);
  EXPECT_TRUE(ran(server(0), detail::kReleaseScript, token())) << "the one grant is handed back";
  EXPECT_EQ(server(1).requests().size(), 1u) << "a busy server holds nothing of ours";
}

TEST_F(FakeQuorum, FrozenServerGetsTheReleaseQueuedBehindItsAcquire) {
  server(0).reply(resp_int(5)).reply(resp_int(1));
  server(1).reply(resp_int(6)).reply(resp_int(1));
  server(2).lose_reply();  // frozen: the acquire may run when it resumes
  ASSERT_TRUE(lock_.try_acquire().ok()) << lock_.last_error();
  server(0).reply(resp_int(1));
  server(1).reply(resp_int(1));
  server(2).lose_reply();
  EXPECT_TRUE(lock_.release().ok()) << "released on a majority";
  EXPECT_FALSE(lock_.held());
  EXPECT_TRUE(ran(server(2), detail::kQuorumAcquireScript, token()));
  ASSERT_GE(server(2).requests().size(), 2u);
  EXPECT_TRUE(runs(server(2).requests().front(), detail::kQuorumAcquireScript));
  const std::vector<std::string>& last = server(2).requests().back();
  EXPECT_TRUE(runs(last, detail::kReleaseScript) && last[0] == "EVAL")
      << "pipelined behind the acquire (and the fence write-back), by body";
  EXPECT_EQ(server(2).opens(), 1u) << "the stream was kept, so the server runs both in order";
}

TEST_F(FakeQuorum, TwoSilentServersIsNoGrantAndTheirKeysAreReleased) {
  server(0).reply(resp_int(5)).reply(resp_int(1));
  server(1).lose_reply().lose_reply();
  server(2).lose_reply().lose_reply();
  const Status s = lock_.try_acquire();
  EXPECT_TRUE(s.code() == ErrorCode::kIndeterminate || s.code() == ErrorCode::kNoQuorum)
      << s.to_string();
  EXPECT_FALSE(lock_.held());
  EXPECT_EQ(lock_.fence(), 0u);
  EXPECT_TRUE(ran(server(0), detail::kReleaseScript, token()));
  EXPECT_EQ(server(1).requests().size(), 2u) << "a release follows the unanswered acquire";
  EXPECT_EQ(server(2).requests().size(), 2u);
}

// --- The lease keeper over a Lock.

class FakeOne : public ::testing::Test {
 protected:
  FakeClock clock_;
  FakeTransport server_{clock_};
  Connection conn_;
};

class FakeKeeper : public FakeOne {
 protected:
  void SetUp() override {
    ConnectionOptions o;
    o.command_timeout = Millis(200);  // renewals fit the validity several times
    ASSERT_TRUE(test::setup_fake(conn_, server_, clock_, o).ok());
    LockOptions lo;
    lo.ttl = kTtl;
    ASSERT_TRUE(lock_.init(Bytes::from_cstr("door"), lo).ok());
    server_.reply(resp_int(4));
    ASSERT_TRUE(lock_.try_acquire().ok());
  }
  // Runs the keeper as a poll loop would, until it loses or `until`.
  void run_until(LeaseKeeper& k, TimePoint until) {
    for (int i = 0; i < 100 && k.state() == LeaseState::kKeeping && clock_.now() < until; ++i) {
      const TimePoint next = k.next_deadline().when();
      if (next > clock_.now()) clock_.set(next < until ? next : until);
      k.step();
    }
  }
  Lock lock_{conn_};
};

TEST_F(FakeKeeper, RenewsBeforeTheValidityEnds) {
  LeaseKeeper k(lock_);
  ASSERT_TRUE(k.start().ok());
  server_.reply(resp_int(1000), Millis(5)).reply(resp_int(1000), Millis(5));
  run_until(k, clock_.now() + Millis(1500));
  EXPECT_EQ(k.state(), LeaseState::kKeeping);
  EXPECT_GE(k.stats().renewals, 2u);
  EXPECT_TRUE(lock_.held());
  EXPECT_TRUE(runs(server_.requests().at(1), detail::kExtendScript));
}

TEST_F(FakeKeeper, NotOwnerIsLostAtOnce) {
  LeaseKeeper k(lock_);
  ASSERT_TRUE(k.start().ok());
  server_.reply(resp_int(0));
  run_until(k, clock_.now() + Millis(900));
  EXPECT_TRUE(k.lost());
  EXPECT_EQ(k.last_status().code(), ErrorCode::kNotOwner);
  EXPECT_FALSE(lock_.held());
}

TEST_F(FakeKeeper, SilentServerIsReportedLostByTheValidityEnd) {
  const TimePoint end = clock_.now() + lock_.remaining();
  LeaseKeeper k(lock_);
  ASSERT_TRUE(k.start().ok());
  for (int i = 0; i < 20; ++i) server_.lose_reply();
  run_until(k, end + Millis(500));
  EXPECT_TRUE(k.lost());
  EXPECT_LE(k.lost_at(), end) << "reported no later than the local validity end";
  EXPECT_GE(k.stats().failures, 1u);
  EXPECT_FALSE(lock_.held());
}

}  // namespace
}  // namespace edgelock
