// Timing-edge tests: lock. Each test drives one timing edge (a late, lost
// or unknown reply, a frozen server) against a real redis-server (through
// test::DelayProxy where a reply must arrive late or be lost) and asserts
// the lease invariant at the moment that edge could break it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/edgelock.h"
#include "lock_keys.h"

namespace edgelock {
namespace {

using test::DelayProxy;
using test::run;

constexpr const char* kKey = "edge";

Nanos slow(Nanos t) { return t * test::slowdown(); }
int64_t slow_ms(int64_t ms) { return ms * test::slowdown(); }
TimePoint now() { return default_clock().now(); }
void sleep_for(Nanos t) { std::this_thread::sleep_for(std::chrono::nanoseconds(t)); }

LockOptions ttl(int64_t ms) {
  LockOptions o;
  o.ttl = Millis(ms);
  return o;
}

// Per test: the suite's server, flushed; conn_ reaches it through a
// DelayProxy (delay 0 until a test sets one), other_ and admin_ directly.
class LockEdges : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    proxy_.reset(new DelayProxy(server_->port(), Nanos::zero()));
    ASSERT_TRUE(proxy_->start());
    ASSERT_TRUE(test::open(other_, server_->url()));
    ASSERT_TRUE(test::open(admin_, server_->url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
  }

  // conn_ through the proxy with `timeout` per command.
  bool open_proxied(Nanos timeout) {
    ConnectionOptions o;
    o.connect_timeout = slow(Millis(2000));
    o.command_timeout = timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    return conn_.setup(proxy_->url().c_str(), o).ok();
  }

  // A grant, extend and release at no delay: connects and loads the scripts, so
  // a later delayed request costs exactly one round trip.
  static void warm(Lock& lock) {
    ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
    ASSERT_TRUE(lock.renew().ok()) << lock.last_error();
    ASSERT_TRUE(lock.release().ok()) << lock.last_error();
    lock.reset_metrics();
  }

  std::string exists(const std::string& key) { return run(admin_, {"EXISTS", key}); }

  std::unique_ptr<DelayProxy> proxy_;
  Connection conn_, other_, admin_;
};

// A grant that arrives after its validity is handed back; the retry is
// granted with the same token and must leave a lock that can be checked
// and released (not kNotHeld with the key left behind).
TEST_F(LockEdges, LateGrantLeavesAUsableLock) {
  ASSERT_TRUE(open_proxied(slow(Millis(2000))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(200))).ok());
  warm(lock);
  // The request reaches the server 250 ms late; its reply, read after the
  // switch back to 0, returns at once: the grant lands after its validity.
  proxy_->set_delay(slow(Millis(250)));
  std::thread fast_again([this] {
    sleep_for(slow(Millis(100)));
    proxy_->set_delay(Nanos::zero());
  });
  const Status s = lock.acquire(slow(Millis(2000)));
  fast_again.join();
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  EXPECT_GE(lock.metrics().attempts, 2u) << "the first grant must have come too late";
  EXPECT_TRUE(lock.held());
  const Result<bool> mine = lock.owned();
  ASSERT_TRUE(mine.ok()) << mine.status().to_string();
  EXPECT_TRUE(mine.value());
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string();
  EXPECT_EQ(exists(kKey), "0");
}

// A renewal whose reply does not come stops at the end of the local
// validity (not a full command timeout later) and then reports not held.
TEST_F(LockEdges, ExtendStopsAtTheValidityEnd) {
  ASSERT_TRUE(open_proxied(slow(Millis(2000))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(400))).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  sleep_for(slow(Millis(100)));
  const Nanos left = lock.remaining();    // about 300 ms
  proxy_->set_delay(slow(Millis(3000)));  // the reply is lost
  const TimePoint t0 = now();
  const Status s = lock.extend(Millis(slow_ms(1000)));
  const Nanos took = now() - t0;
  EXPECT_FALSE(s.ok());
  EXPECT_LE(took, left + slow(Millis(50))) << "waited past the validity end";
  EXPECT_FALSE(lock.held());
  EXPECT_GT(lock.token().size, 0u) << "the token is kept for release()";
}

// extend(300, kReplace) on a 10 s lease, reply lost: the local validity
// does not outlast 300 ms (the outcome is unknown), and the request, landing
// late, never cuts the server's lease (docs/late-requests.md).
TEST_F(LockEdges, LostShortExtendNeverCutsTheLease) {
  ASSERT_TRUE(open_proxied(slow(Millis(500))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(10000))).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->set_delay(slow(Millis(400)));  // applied after 400 ms, reply after 800
  EXPECT_EQ(lock.extend(Millis(slow_ms(300)), ExtendMode::kReplace).code(), ErrorCode::kTimeout);
  EXPECT_LE(lock.remaining(), slow(Millis(300)));
  proxy_->set_delay(Nanos::zero());
  ASSERT_TRUE(proxy_->wait_idle(slow(Millis(3000))));
  // Cut to the 300 ms asked, it would be gone or below 600 ms by now.
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", kKey})), 2 * slow_ms(300))
      << "the late extend cut the lease";
  Lock rival(other_);
  ASSERT_TRUE(rival.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  EXPECT_EQ(rival.try_acquire().code(), ErrorCode::kBusy);
}

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
  EXPECT_LT(lock.metrics().attempts, 100u);
  EXPECT_GE(lock.metrics().attempts, 2u);
}

// A release whose outcome is unknown means not held, with the token
// kept so release() can be retried and succeeds once the server answers.
TEST_F(LockEdges, UnknownReleaseIsNotHeld) {
  ASSERT_TRUE(open_proxied(slow(Millis(300))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->set_delay(slow(Millis(5000)));  // still on its way when the test ends
  EXPECT_EQ(lock.release().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(lock.held()) << "the delete may have run";
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  proxy_->set_delay(Nanos::zero());
  const Status again = lock.release();  // a new connection, no delay
  EXPECT_TRUE(again.ok()) << again.to_string() << " " << lock.last_error();
  EXPECT_EQ(exists(kKey), "0");
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
  Cooldown cooldown(other_);
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
  EXPECT_GE(lock.metrics().busy, 1u) << "the wait saw the holder";
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

// An acquire that ends in kTimeout after its grant may have landed keeps
// the token, so release() removes the key. The path that could lose it: a
// late grant handed back, then the retry's reply lost.
TEST_F(LockEdges, FailedAcquireKeepsTokenForCleanup) {
  ASSERT_TRUE(open_proxied(slow(Millis(600))));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(200))).ok());
  warm(lock);
  // t=0: grant reaches us at 500 (late); hand-back release answered at
  // 1000; at 875 the delay grows so the retry (sent ~1000) is lost.
  proxy_->set_delay(slow(Millis(250)));
  std::thread worse([this] {
    sleep_for(slow(Millis(875)));
    proxy_->set_delay(slow(Millis(2000)));
  });
  const Status s = lock.acquire(slow(Millis(1200)));
  worse.join();
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_GE(lock.metrics().attempts, 2u);
  EXPECT_FALSE(lock.held());
  // The lost retry lands (it re-arms our key for 200 ms); release() must
  // still know the token and remove it. Wait for the landing itself, not
  // for the proxy to drain: our closed connection's end-of-stream is still
  // queued behind the old delay and may come after the key expired again.
  proxy_->set_delay(Nanos::zero());
  bool landed = false;
  const auto give_up = std::chrono::steady_clock::now() + slow(Millis(5000));
  for (int i = 0; i < 100000 && !landed && std::chrono::steady_clock::now() < give_up; ++i) {
    landed = exists(kKey) == "1";
    if (!landed) sleep_for(Millis(2));
  }
  ASSERT_TRUE(landed) << "the lost retry never reached the server";
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string() << " " << lock.last_error();
  EXPECT_EQ(run(admin_, {"PTTL", kKey}), "-2");
  Lock next(other_);
  ASSERT_TRUE(next.init(Bytes::from_cstr(kKey), ttl(1000)).ok());
  EXPECT_TRUE(next.try_acquire().ok());
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

// A fence counter that cannot be incremented (wrong type, or at
// its maximum) fails the acquire before anything is written.
TEST_F(LockEdges, UnusableFenceCounterWritesNothing) {
  Lock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_EQ(run(admin_, {"RPUSH", "{edge}:fence", "x"}), "1");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_NE(std::string(lock.last_error()).find("fence"), std::string::npos) << lock.last_error();
  EXPECT_EQ(exists(kKey), "0") << "the lock key was set";
  EXPECT_FALSE(lock.held());

  ASSERT_EQ(run(admin_, {"DEL", "{edge}:fence"}), "1");
  ASSERT_EQ(run(admin_, {"SET", "{edge}:fence", "9223372036854775807"}), "OK");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(exists(kKey), "0") << "the lock key was set";
  EXPECT_EQ(run(admin_, {"GET", "{edge}:fence"}), "9223372036854775807");
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
