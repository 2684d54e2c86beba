// Timing-edge tests of Lock alone (the edges it shares with FairLock are in
// lease_edges): each test drives one timing edge or a server-side oddity
// (a holder without a TTL, companion keys of the wrong type) against a real
// redis-server and asserts the lease invariant where that edge could break
// it.
#include <gtest/gtest.h>

#include <string>

#include "base/lock_keys.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/edgelock.h"
#include "proxied_edges.h"

namespace edgelock {
namespace {

using namespace edges;  // NOLINT(google-build-using-namespace): the fixture's helpers
using test::run;

LockOptions ttl(int64_t ms) {
  LockOptions o;
  o.ttl = Millis(ms);
  return o;
}

class LockEdges : public ProxiedEdges {};

// A back end whose replicas never confirm (WAIT short): every write that
// granted or extended reports kNoQuorum although the primary applied it.
class UnconfirmedBackend final : public Backend {
 public:
  explicit UnconfirmedBackend(Connection& c) : c_(c) {}
  Status check_key(Bytes) override { return Status(); }
  Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) override {
    const Result<const Reply*> r = c_.eval(call, deadline);
    if (unconfirmed && call.writes_lease && r.ok() && r.value()->type == ReplyType::kInteger &&
        r.value()->integer > 0) {
      return ErrorCode::kNoQuorum;
    }
    return r;
  }
  Result<const Reply*> command(Bytes, Span<const Bytes> args, Deadline d) override {
    return c_.command(args, d);
  }
  Connection& connection_for(Bytes) override { return c_; }
  Clock& clock() const override { return c_.clock(); }
  Nanos command_timeout() const override { return c_.options().command_timeout; }
  const char* last_error() const override { return c_.last_error(); }
  bool unconfirmed = false;

 private:
  Connection& c_;
};

// Router part: an extend applied on the primary but not confirmed by WAIT
// (kNoQuorum) has an unknown outcome: the local validity is cut to what it
// could have set, and the primary's lease is never cut.
TEST_F(LockEdges, UnconfirmedShorteningExtendShortensValidity) {
  UnconfirmedBackend backend(other_);
  Lock lock(backend);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  backend.unconfirmed = true;
  EXPECT_EQ(lock.extend(Millis(300), ExtendMode::kReplace).code(), ErrorCode::kNoQuorum);
  EXPECT_LE(lock.remaining(), Millis(300));
  EXPECT_GT(lock.token().size, 0u);
  const int64_t pttl = std::stoll(run(admin_, {"PTTL", kKey}));
  EXPECT_GT(pttl, 9000) << "an extend never cuts the lease";
}

// An extend that leaves no validity is not an ok.
TEST_F(LockEdges, ExtendLeavingNoValidityIsExpired) {
  Lock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  // Without a TTL on the server the extend sets the 1 ms asked (a lease it
  // never cuts), below the 2 ms drift allowance.
  ASSERT_EQ(run(admin_, {"PERSIST", kKey}), "1");
  EXPECT_EQ(lock.extend(Millis(1), ExtendMode::kReplace).code(), ErrorCode::kExpired);
  EXPECT_FALSE(lock.held());
  EXPECT_GT(lock.token().size, 0u) << "the token is kept for release()";
  EXPECT_NE(lock.release().code(), ErrorCode::kNotHeld);
}

// A holder without a TTL (set by an admin) gets the documented
// backoff, not a 1 ms poll (about 800 attempts a second).
TEST_F(LockEdges, HolderWithoutTtlGetsBackoff) {
  ASSERT_EQ(run(admin_, {"SET", kKey, "admin-holds-it"}), "OK");
  Lock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(1000)).ok());
  EXPECT_EQ(lock.acquire(Millis(1000)).code(), ErrorCode::kBusy);
  // Backoff 2..250 ms jittered: about 15-20 attempts in 1 s.
  EXPECT_LT(other_.metrics().attempts, 100u);  // the lock alone uses other_
  EXPECT_GE(other_.metrics().attempts, 2u);
}

// A release that timed out, then one that succeeded: last_error() must not
// keep the old "no reply within the deadline" next to the ok.
TEST_F(LockEdges, ErrorTextIsNotStickyAfterSuccess) {
  ASSERT_TRUE(open_proxied(slow(Millis(300))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->set_delay(slow(Millis(5000)));
  ASSERT_EQ(lock.release().code(), ErrorCode::kTimeout);
  EXPECT_NE(std::string(lock.last_error()).find("no reply"), std::string::npos)
      << lock.last_error();
  proxy_->set_delay(Nanos::zero());
  ASSERT_TRUE(lock.release().ok()) << lock.last_error();
  EXPECT_STREQ(lock.last_error(), "") << "ok, with a stale cause";
}

// init() refusing an argument names it in last_error().
TEST_F(LockEdges, InitNamesTheRefusedArgument) {
  Lock lock(other_);
  EXPECT_EQ(lock.init(Bytes(), ttl(1000)).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(lock.last_error()).find("key is empty"), std::string::npos)
      << lock.last_error();
  const std::string longer(kMaxKeyLen + 1, 'k');
  EXPECT_EQ(lock.init(Bytes::from_cstr(longer.c_str()), ttl(1000)).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(lock.last_error()).find("longer than kMaxKeyLen"), std::string::npos)
      << lock.last_error();
  EXPECT_EQ(lock.init(Bytes::from_cstr(kKey), ttl(0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(lock.last_error()).find("ttl"), std::string::npos) << lock.last_error();
  Semaphore sem(other_);
  SemaphoreOptions so;
  so.permits = 2;
  EXPECT_EQ(sem.init(Bytes(), so).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(sem.last_error()).find("key is empty"), std::string::npos)
      << sem.last_error();
  FairLock fair(other_);
  EXPECT_EQ(fair.init(Bytes::from_cstr(longer.c_str())).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(fair.last_error()).find("longer than kMaxKeyLen"), std::string::npos)
      << fair.last_error();
  RateLimiter cooldown(other_);
  EXPECT_EQ(cooldown.init(Bytes()).code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(std::string(cooldown.last_error()).find("key is empty"), std::string::npos)
      << cooldown.last_error();
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(1000)).ok());
  EXPECT_STREQ(lock.last_error(), "") << "a good init() clears it";
}

// cancel() of an acquire waiting for another holder: nothing was ever
// granted, so release() has nothing to release (kNotHeld), not a stale
// token (kNotOwner); the holder's key is left alone.
TEST_F(LockEdges, ReleaseAfterCancelledWaitIsNotHeld) {
  ASSERT_TRUE(open_proxied(slow(Millis(2000))));
  Lock holder(other_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_EQ(lock.start_acquire(slow(Millis(5000))).code(), ErrorCode::kInProgress);
  const TimePoint until = now() + slow(Millis(300));
  for (int i = 0; i < 100000 && now() < until; ++i) {
    const Status s = lock.step();
    ASSERT_EQ(s.code(), ErrorCode::kInProgress) << s.to_string();
    sleep_for(Millis(1));
  }
  EXPECT_GE(conn_.metrics().busy, 1u) << "the wait saw the holder";
  lock.cancel();
  const Status r = lock.release();
  EXPECT_EQ(r.code(), ErrorCode::kNotHeld) << r.to_string() << " " << lock.last_error();
  EXPECT_EQ(exists(kKey), "1") << "the holder keeps its key";
  // A token that was granted and then taken over is still kNotOwner.
  Lock lapsed(conn_);
  ASSERT_TRUE(lapsed.init(Bytes::from_cstr("lapsed"), ttl(slow_ms(50))).ok());
  ASSERT_TRUE(lapsed.try_acquire().ok()) << lapsed.last_error();
  sleep_for(slow(Millis(120)));
  EXPECT_EQ(lapsed.release().code(), ErrorCode::kNotOwner);
}

// Names: "foo" and "{foo}" get different companion keys, each in
// its lock key's cluster slot.
TEST(LockKeys, CompanionNamesAreUniquePerKey) {
  auto name = [](const std::string& key, const char* suffix) {
    uint8_t out[kMaxKeyLen + 8];
    const Result<size_t> r =
        detail::companion_key(Bytes(key.data(), key.size()), suffix, out, sizeof out);
    return r.ok() ? std::string(reinterpret_cast<char*>(out), r.value()) : std::string("<error>");
  };
  const char* const keys[] = {"foo", "{foo}", "{foo}:", "foo}", "{foo}}", "a{b}c", "{}", "{7}"};
  for (const char* suffix : {":fence", ":wake"}) {
    for (const char* k1 : keys) {
      const std::string c1 = name(k1, suffix);
      ASSERT_NE(c1, "<error>") << k1;
      // Keys a cluster accepts ("foo}" and "{}" never shared their slot).
      if (std::string(k1) != "foo}" && std::string(k1) != "{}") {
        EXPECT_EQ(key_slot(Bytes::from_cstr(k1)), key_slot(Bytes(c1.data(), c1.size()))) << k1;
      }
      for (const char* k2 : keys) {
        for (const char* s2 : {":fence", ":wake"}) {
          if (std::string(k1) == k2 && std::string(suffix) == s2) continue;
          EXPECT_NE(c1, name(k2, s2)) << k1 << suffix << " vs " << k2 << s2;
        }
        EXPECT_NE(c1, k2) << "a companion is never one of these lock keys";
      }
    }
  }
  EXPECT_EQ(name("foo", ":fence"), "{foo}:fence") << "existing deployments keep their names";
  EXPECT_EQ(name("site{7}:pump", ":fence"), "site{7}:pump:fence");
  EXPECT_EQ(key_slot("{foo}"), key_slot(Bytes::from_cstr(name("{foo}", ":fence").c_str())));
  EXPECT_EQ(key_slot("{foo}"), key_slot(Bytes::from_cstr(name("{foo}", ":wake").c_str())));
}

// On a server: locks on "foo" and "{foo}" on one server keep separate
// fences, and one's grant does not swallow the other's release signal.
TEST_F(LockEdges, BracedAndPlainKeysDoNotShareCompanions) {
  Lock plain(other_), braced(admin_);
  ASSERT_TRUE(plain.init(Bytes::from_cstr("foo"), ttl(10000)).ok());
  ASSERT_TRUE(braced.init(Bytes::from_cstr("{foo}"), ttl(10000)).ok());
  ASSERT_TRUE(plain.try_acquire().ok());
  EXPECT_EQ(plain.fence(), 1u);
  ASSERT_TRUE(plain.release().ok());
  EXPECT_EQ(run(admin_, {"LLEN", "{foo}:wake"}), "1") << "plain's release signal";
  ASSERT_TRUE(braced.try_acquire().ok());
  EXPECT_EQ(braced.fence(), 1u) << "a fence counter of its own";
  EXPECT_EQ(run(admin_, {"LLEN", "{foo}:wake"}), "1") << "braced's grant took plain's signal";
  ASSERT_TRUE(braced.release().ok());
  ASSERT_TRUE(plain.try_acquire().ok());
  EXPECT_EQ(plain.fence(), 2u);
  ASSERT_TRUE(plain.release().ok());
}

// A wake list of the wrong type does not make a release half done
// (key deleted, error returned): the release succeeds without a signal.
TEST_F(LockEdges, WrongTypeWakeKeyDoesNotSplitRelease) {
  Lock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"SET", "{edge}:wake", "not-a-list"}), "OK");
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string() << " " << lock.last_error();
  EXPECT_EQ(exists(kKey), "0");
  EXPECT_EQ(run(admin_, {"GET", "{edge}:wake"}), "not-a-list");
}

}  // namespace
}  // namespace edgelock
