// Timing-edge tests shared by Lock and FairLock (one typed suite): the
// lease invariant of every lock. Never claim a lease the server may not
// hold; on an unknown outcome hold less but keep the token for cleanup.
// Against a real redis-server, through test::DelayProxy where a reply must
// arrive late or be lost. What only one of them has is in lock_edges and
// fair_edges.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <type_traits>

#include "edgelock/edgelock.h"
#include "proxied_edges.h"

namespace edgelock {
namespace {

using namespace edges;  // NOLINT(google-build-using-namespace): the fixture's helpers
using test::run;

// What differs between the two lock types: options and what the server
// needs before the first delayed request.
struct LockTraits {
  using Type = Lock;
  static LockOptions ttl(int64_t ms) {
    LockOptions o;
    o.ttl = Millis(ms);
    return o;
  }
  static void prepare(Connection&) {}
};

struct FairLockTraits {
  using Type = FairLock;
  // The waiter timeout scales with the slowdown: a join's retry after a
  // lost reply must land before the place lapses, under qemu too.
  static FairLockOptions ttl(int64_t ms) {
    FairLockOptions o;
    o.ttl = Millis(ms);
    o.waiter_timeout = Millis(slow_ms(2000));
    return o;
  }
  static void prepare(Connection& admin) { load_fair_scripts(admin); }
};

template <class T>
class LeaseEdges : public ProxiedEdges {
 protected:
  using L = typename T::Type;
  void SetUp() override {
    ProxiedEdges::SetUp();
    if (HasFatalFailure()) return;
    T::prepare(admin_);
  }
};

struct TraitsName {
  template <class T>
  static std::string GetName(int) {
    return std::is_same<T, LockTraits>::value ? "Lock" : "FairLock";
  }
};

using LockTypes = ::testing::Types<LockTraits, FairLockTraits>;
TYPED_TEST_SUITE(LeaseEdges, LockTypes, TraitsName);

// A grant that arrives after its validity is handed back; the retry is
// granted with the same token and must leave a lock that can be checked
// and released (not kNotHeld with the key left behind).
TYPED_TEST(LeaseEdges, LateGrantLeavesAUsableLock) {
  ASSERT_TRUE(this->open_proxied(slow(Millis(2000))));
  typename TestFixture::L lock(this->conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(slow_ms(200))).ok());
  this->warm(lock);
  // The request reaches the server 250 ms late; its reply, read after the
  // switch back to 0, returns at once: the grant lands after its validity.
  this->proxy_->set_delay(slow(Millis(250)));
  std::thread fast_again([this] {
    sleep_for(slow(Millis(100)));
    this->proxy_->set_delay(Nanos::zero());
  });
  const Status s = lock.acquire(slow(Millis(2000)));
  fast_again.join();
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  EXPECT_GE(this->attempts(), 2u) << "the first grant must have come too late";
  EXPECT_TRUE(lock.held());
  const Result<bool> mine = lock.owned();
  ASSERT_TRUE(mine.ok()) << mine.status().to_string();
  EXPECT_TRUE(mine.value());
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string();
  EXPECT_EQ(this->exists(kKey), "0");
}

// A renewal whose reply does not come stops at the end of the local
// validity (not a full command timeout later) and then reports not held.
TYPED_TEST(LeaseEdges, ExtendStopsAtTheValidityEnd) {
  ASSERT_TRUE(this->open_proxied(slow(Millis(2000))));
  typename TestFixture::L lock(this->conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(slow_ms(400))).ok());
  this->warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  sleep_for(slow(Millis(100)));
  const Nanos left = lock.remaining();          // about 300 ms
  this->proxy_->set_delay(slow(Millis(3000)));  // the reply is lost
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
// late, never cuts the server's lease (docs/late-requests.md): a rival still
// finds the key busy.
TYPED_TEST(LeaseEdges, LostShortExtendNeverCutsTheLease) {
  ASSERT_TRUE(this->open_proxied(slow(Millis(500))));
  typename TestFixture::L lock(this->conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(slow_ms(10000))).ok());
  this->warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  this->proxy_->set_delay(slow(Millis(400)));  // applied after 400 ms, reply after 800
  EXPECT_EQ(lock.extend(Millis(slow_ms(300)), ExtendMode::kReplace).code(), ErrorCode::kTimeout);
  EXPECT_LE(lock.remaining(), slow(Millis(300)));
  this->proxy_->set_delay(Nanos::zero());
  ASSERT_TRUE(this->proxy_->wait_idle(slow(Millis(3000))));
  // Cut to the 300 ms asked, it would be gone or below 600 ms by now.
  EXPECT_GT(std::stoll(run(this->admin_, {"PTTL", kKey})), 2 * slow_ms(300))
      << "the late extend cut the lease";
  typename TestFixture::L rival(this->other_);
  ASSERT_TRUE(rival.init(Bytes::from_cstr(kKey), TypeParam::ttl(10000)).ok());
  EXPECT_EQ(rival.try_acquire().code(), ErrorCode::kBusy);
}

// A release whose outcome is unknown means not held, with the token
// kept so release() can be retried and succeeds once the server answers.
TYPED_TEST(LeaseEdges, UnknownReleaseIsNotHeld) {
  ASSERT_TRUE(this->open_proxied(slow(Millis(300))));
  typename TestFixture::L lock(this->conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(10000)).ok());
  this->warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  this->proxy_->set_delay(slow(Millis(5000)));  // still on its way when the test ends
  EXPECT_EQ(lock.release().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(lock.held()) << "the delete may have run";
  EXPECT_EQ(lock.remaining(), Nanos::zero());
  this->proxy_->set_delay(Nanos::zero());
  const Status again = lock.release();  // a new connection, no delay
  EXPECT_TRUE(again.ok()) << again.to_string() << " " << lock.last_error();
  EXPECT_EQ(this->exists(kKey), "0");
}

// An acquire that ends in kTimeout after its grant may have landed keeps
// the token, so release() removes the key. The path that could lose it: a
// late grant handed back, then the retry's reply lost.
TYPED_TEST(LeaseEdges, FailedAcquireKeepsTokenForCleanup) {
  ASSERT_TRUE(this->open_proxied(slow(Millis(600))));
  typename TestFixture::L lock(this->conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(slow_ms(200))).ok());
  this->warm(lock);
  // t=0: grant reaches us at 500 (late); hand-back release answered at
  // 1000; at 875 the delay grows so the retry (sent ~1000) is lost.
  this->proxy_->set_delay(slow(Millis(250)));
  std::thread worse([this] {
    sleep_for(slow(Millis(875)));
    this->proxy_->set_delay(slow(Millis(2000)));
  });
  const Status s = lock.acquire(slow(Millis(1200)));
  worse.join();
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_GE(this->attempts(), 2u);
  EXPECT_FALSE(lock.held());
  // The lost retry lands (it re-arms our key for 200 ms); release() must
  // still know the token and remove it. Wait for the landing itself, not
  // for the proxy to drain: our closed connection's end-of-stream is still
  // queued behind the old delay and may come after the key expired again.
  this->proxy_->set_delay(Nanos::zero());
  bool landed = false;
  const auto give_up = std::chrono::steady_clock::now() + slow(Millis(5000));
  for (int i = 0; i < 100000 && !landed && std::chrono::steady_clock::now() < give_up; ++i) {
    landed = this->exists(kKey) == "1";
    if (!landed) sleep_for(Millis(2));
  }
  ASSERT_TRUE(landed) << "the lost retry never reached the server";
  const Status r = lock.release();
  EXPECT_TRUE(r.ok()) << r.to_string() << " " << lock.last_error();
  EXPECT_EQ(run(this->admin_, {"PTTL", kKey}), "-2");
  typename TestFixture::L next(this->other_);
  ASSERT_TRUE(next.init(Bytes::from_cstr(kKey), TypeParam::ttl(1000)).ok());
  EXPECT_TRUE(next.try_acquire().ok());
}

// A fence counter that cannot be incremented (wrong type, or at its
// maximum) fails the acquire (a try or a wait) before anything is written.
TYPED_TEST(LeaseEdges, UnusableFenceCounterWritesNothing) {
  typename TestFixture::L lock(this->other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), TypeParam::ttl(10000)).ok());
  ASSERT_EQ(run(this->admin_, {"RPUSH", "{edge}:fence", "x"}), "1");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_NE(std::string(lock.last_error()).find("fence"), std::string::npos) << lock.last_error();
  EXPECT_EQ(this->exists(kKey), "0") << "the lock key was set";
  EXPECT_FALSE(lock.held());

  ASSERT_EQ(run(this->admin_, {"DEL", "{edge}:fence"}), "1");
  ASSERT_EQ(run(this->admin_, {"SET", "{edge}:fence", "9223372036854775807"}), "OK");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(lock.acquire(Millis(200)).code(), ErrorCode::kServerError);
  EXPECT_EQ(this->exists(kKey), "0") << "the lock key was set";
  EXPECT_EQ(run(this->admin_, {"GET", "{edge}:fence"}), "9223372036854775807");
}

}  // namespace
}  // namespace edgelock
