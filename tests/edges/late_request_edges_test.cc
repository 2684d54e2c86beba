// Requests given up on that still run later (docs/late-requests.md), for
// every lease type, against a real redis-server behind test::DelayProxy,
// which holds back one chunk (a request, or a reply) past the client's
// timeout and then delivers it. Whatever the order on the server, the late
// request must change nothing the client claims afterwards: each test
// checks the server against the claim once the held bytes have landed.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {
namespace {

using test::DelayProxy;
using test::run;

constexpr const char* kKey = "late";
constexpr int kToServer = 0;
constexpr int kToClient = 1;

Nanos slow(Nanos t) { return t * test::slowdown(); }
Millis slow_ms(int64_t ms) { return Millis(ms * test::slowdown()); }
void sleep_for(Nanos t) { std::this_thread::sleep_for(std::chrono::nanoseconds(t)); }
int64_t as_int(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  return end == s.c_str() ? -100 : v;
}
std::string str(Bytes b) { return std::string(reinterpret_cast<const char*>(b.data), b.size); }

// Per test: the suite's server, flushed; conn_ reaches it through a
// DelayProxy (no delay but the holds a test arms), admin_ and rival_
// directly.
class LateRequest : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    proxy_.reset(new DelayProxy(server_->port(), Nanos::zero()));
    ASSERT_TRUE(proxy_->start());
    ASSERT_TRUE(test::open(admin_, server_->url()));
    ASSERT_TRUE(test::open(rival_, server_->url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
  }

  // conn_ through the proxy with `timeout` per command.
  void open_proxied(Nanos timeout) {
    ConnectionOptions o;
    o.connect_timeout = slow(Millis(2000));
    o.command_timeout = timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    ASSERT_TRUE(conn_.init(proxy_->url().c_str(), o).ok());
  }

  // Waits until a held chunk was caught and everything has been delivered.
  void landed() {
    for (int i = 0; i < 4000 && !proxy_->held(kToServer) && !proxy_->held(kToClient); ++i) {
      sleep_for(Millis(5));
    }
    ASSERT_TRUE(proxy_->held(kToServer) || proxy_->held(kToClient)) << "nothing was held";
    ASSERT_TRUE(proxy_->wait_idle(slow(Millis(8000))));
  }

  // ms the server keeps `key` (-2: none), and its string value.
  int64_t pttl(const char* key = kKey) { return as_int(run(admin_, {"PTTL", key})); }
  std::string get() { return run(admin_, {"GET", kKey}); }
  // ms left of permit `id` by the server's clock (-1: no such permit).
  int64_t permit_left(Bytes id) {
    const int64_t score = as_int(run(admin_, {"ZSCORE", kKey, str(id)}));
    if (score < 0) return -1;
    std::istringstream time(run(admin_, {"TIME"}));
    int64_t sec = 0, usec = 0;
    time >> sec >> usec;
    return score - (sec * 1000 + usec / 1000);
  }
  // ms the server keeps a reentrant grant of `lock` (-1: not its grant).
  int64_t grant_left(const ReentrantLock& lock) {
    if (run(admin_, {"HGET", kKey, "owner"}) != str(lock.owner()) ||
        run(admin_, {"HGET", kKey, "handle"}) != str(lock.handle())) {
      return -1;
    }
    return pttl();
  }
  // `lock` on conn_ (250 ms timeout), a 10 s TTL.
  void init_reentrant(ReentrantLock& lock) {
    open_proxied(slow(Millis(250)));
    ReentrantLockOptions o;
    o.ttl = slow_ms(10000);
    ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  }
  // Nothing is claimed, but the key is still ours: release() deletes it.
  void expect_ours_until_released(ReentrantLock& lock) {
    EXPECT_FALSE(lock.held());
    EXPECT_GE(grant_left(lock), 0) << "the key is ours";
    EXPECT_TRUE(lock.release().ok()) << lock.last_error();
    EXPECT_EQ(run(admin_, {"EXISTS", kKey}), "0") << "left behind until its TTL";
  }

  std::unique_ptr<DelayProxy> proxy_;
  Connection conn_, admin_, rival_;
};

// The claim holds on the server: it keeps our lease at least as long as
// remaining() says (`left_ms` < 0: not at all).
void expect_truth(const Lease& lease, int64_t left_ms) {
  ASSERT_TRUE(lease.held()) << "the test needs a lease still claimed when the late request lands";
  ASSERT_GE(left_ms, 0) << "claimed for " << test::ms(lease.remaining())
                        << " ms more, the server does not hold it";
  EXPECT_GE(Nanos(Millis(left_ms + 5)), lease.remaining())
      << "claimed for " << test::ms(lease.remaining()) << " ms more, the server keeps it "
      << left_ms << " ms";
}

// --- A late shortening extend lands after a later, longer one (every
// lease type): extends never cut a lease.

TEST_F(LateRequest, LockShorteningExtendAfterALongerOne) {
  open_proxied(slow(Millis(250)));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), LockOptions{slow_ms(10000)}).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kExtendScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(lock.extend(slow_ms(400), ExtendMode::kReplace).ok());
  EXPECT_LE(lock.remaining(), slow(Millis(400)));
  const Status s = lock.extend(slow_ms(10000), ExtendMode::kReplace);
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  landed();
  expect_truth(lock, get() == str(lock.token()) ? pttl() : -1);
  EXPECT_TRUE(lock.release().ok());
}

TEST_F(LateRequest, FairLockShorteningExtendAfterALongerOne) {
  open_proxied(slow(Millis(250)));
  FairLock lock(conn_);
  FairLockOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kExtendScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(lock.extend(slow_ms(400), ExtendMode::kReplace).ok());
  const Status s = lock.extend(slow_ms(10000), ExtendMode::kReplace);
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  landed();
  expect_truth(lock, get() == str(lock.token()) ? pttl() : -1);
  EXPECT_TRUE(lock.release().ok());
}

TEST_F(LateRequest, PermitShorteningExtendAfterALongerOne) {
  open_proxied(slow(Millis(250)));
  Semaphore sem(conn_);
  SemaphoreOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(sem.init(Bytes::from_cstr(kKey), o).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok()) << sem.last_error();
  proxy_->hold_next(kToServer, detail::kSemExtendScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(p.extend(slow_ms(400)).ok());
  const Status s = p.extend(slow_ms(10000));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << sem.last_error();
  landed();
  expect_truth(p, permit_left(p.token()));
  EXPECT_TRUE(p.release().ok());
}

TEST_F(LateRequest, ReentrantShorteningExtendAfterALongerOne) {
  open_proxied(slow(Millis(250)));
  ReentrantLock lock(conn_);
  ReentrantLockOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantExtendScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(lock.extend(slow_ms(400)).ok());
  const Status s = lock.extend(slow_ms(10000));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  landed();
  expect_truth(lock, grant_left(lock));
  EXPECT_TRUE(lock.release().ok());
}

// --- A reentrant request of an earlier grant lands on the next grant.

TEST_F(LateRequest, ReentrantExtendOfAnEarlierGrant) {
  open_proxied(slow(Millis(250)));
  ReentrantLock lock(conn_);
  ReentrantLockOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantExtendScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.extend(slow_ms(300)).ok());
  ASSERT_TRUE(lock.release().ok()) << lock.last_error();
  ASSERT_TRUE(lock.acquire(slow(Millis(2000))).ok()) << lock.last_error();
  EXPECT_EQ(lock.fence(), 2u);
  landed();
  expect_truth(lock, grant_left(lock));
  EXPECT_TRUE(lock.release().ok());
}

TEST_F(LateRequest, ReentrantReleaseOfAnEarlierGrant) {
  open_proxied(slow(Millis(250)));
  ReentrantLock lock(conn_);
  ReentrantLockOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantReleaseScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.release().ok()) << "the held release must time out";
  EXPECT_FALSE(lock.held());
  // The retried release cleans up (the first has not landed yet).
  const Status again = lock.release();
  EXPECT_TRUE(again.ok()) << again.to_string();
  ASSERT_TRUE(lock.acquire(slow(Millis(2000))).ok()) << lock.last_error();
  landed();
  expect_truth(lock, grant_left(lock));
  EXPECT_TRUE(lock.release().ok());
}

// A partial release of unknown outcome: the levels left are claimed for
// no more than the release's own TTL from its start, however long the old
// validity was (reentrant_lock.h), as after an extend of unknown outcome.
TEST_F(LateRequest, ReentrantPartialReleaseOfUnknownOutcome) {
  open_proxied(slow(Millis(250)));
  ReentrantLock lock(conn_);
  ReentrantLockOptions o;
  o.ttl = slow_ms(2000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  ASSERT_TRUE(lock.acquire(Nanos(0)).ok()) << lock.last_error();
  ASSERT_TRUE(lock.extend(slow_ms(20000)).ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantReleaseScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.release().ok()) << "the held release must time out";
  EXPECT_EQ(lock.depth(), 1u);
  EXPECT_LE(lock.remaining(), Nanos(o.ttl)) << "the old validity was kept";
  landed();
  expect_truth(lock, grant_left(lock));
  for (int i = 0; i < 4 && lock.release().code() != ErrorCode::kNotHeld; ++i) {
  }
}

// --- A late request leaves our reentrant key at a depth the handle never
// set: nothing is claimed, and release() still deletes the key.

TEST_F(LateRequest, ReentrantDepthLoweredByALateRelease) {
  ReentrantLock lock(conn_);
  init_reentrant(lock);
  ASSERT_TRUE(lock.try_acquire().ok() && lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantReleaseScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.release().ok()) << "the held release must time out";
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();  // depth 2 again
  landed();
  ASSERT_EQ(run(admin_, {"HGET", kKey, "depth"}), "1") << "the late release ran last";
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kNotOwner);
  expect_ours_until_released(lock);
}

TEST_F(LateRequest, ReentrantDepthRaisedByALateAcquire) {
  ReentrantLock lock(conn_);
  init_reentrant(lock);
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantAcquireScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.try_acquire().ok()) << "the held re-entry must time out";
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();  // depth 2
  ASSERT_TRUE(lock.release().ok()) << lock.last_error();      // depth 1
  landed();
  ASSERT_EQ(run(admin_, {"HGET", kKey, "depth"}), "2") << "the late re-entry ran last";
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotOwner);
  expect_ours_until_released(lock);
}

// An attempt given up on, then a busy reply: the first attempt may still
// land once the other owner lets go, and release() removes it.
TEST_F(LateRequest, ReentrantAttemptLandsAfterABusyRetry) {
  ReentrantLock lock(conn_);
  init_reentrant(lock);
  ReentrantLock other(rival_);
  ReentrantLockOptions o;
  o.ttl = slow_ms(10000);
  ASSERT_TRUE(other.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(other.try_acquire().ok()) << other.last_error();
  proxy_->hold_next(kToServer, detail::kReentrantAcquireScript.sha1, slow(Millis(1500)));
  EXPECT_FALSE(lock.try_acquire().ok()) << "the held attempt must time out";
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(other.release().ok()) << other.last_error();
  landed();
  expect_ours_until_released(lock);  // the first attempt landed on the free key
}

// --- A late grant is handed back; that release is held past its timeout
// and lands after the retry was granted. TTL < the grant's reply delay <
// command timeout < the release's hold, and the hold ends within the
// retry's validity.

struct HandBackTiming {
  Millis ttl = slow_ms(1000);
  Nanos reply_hold = slow(Millis(1200));
  Nanos command_timeout = slow(Millis(1500));
  Nanos release_hold = slow(Millis(1800));
};

TEST_F(LateRequest, LockHandBackLandsAfterTheRetry) {
  const HandBackTiming t;
  open_proxied(t.command_timeout);
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), LockOptions{t.ttl}).ok());
  ASSERT_TRUE(lock.try_acquire().ok());  // connects and loads the scripts
  ASSERT_TRUE(lock.release().ok());
  const uint32_t before = conn_.metrics().attempts;
  proxy_->hold_next(kToClient, "", t.reply_hold);
  proxy_->hold_next(kToServer, detail::kReleaseScript.sha1, t.release_hold);
  const Status s = lock.acquire(slow(Millis(6000)));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  EXPECT_GE(conn_.metrics().attempts - before, 2u) << "the first grant must have come too late";
  landed();
  expect_truth(lock, get() == str(lock.token()) ? pttl() : -1);
}

TEST_F(LateRequest, FairLockHandBackLandsAfterTheRetry) {
  const HandBackTiming t;
  open_proxied(t.command_timeout);
  FairLock lock(conn_);
  FairLockOptions o;
  o.ttl = t.ttl;
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());
  proxy_->hold_next(kToClient, "", t.reply_hold);
  proxy_->hold_next(kToServer, detail::kFairReleaseScript.sha1, t.release_hold);
  const Status s = lock.acquire(slow(Millis(6000)));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  landed();
  expect_truth(lock, get() == str(lock.token()) ? pttl() : -1);
}

TEST_F(LateRequest, SemaphoreHandBackLandsAfterTheRetry) {
  const HandBackTiming t;
  open_proxied(t.command_timeout);
  Semaphore sem(conn_);
  SemaphoreOptions o;
  o.ttl = t.ttl;
  ASSERT_TRUE(sem.init(Bytes::from_cstr(kKey), o).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok());
  ASSERT_TRUE(p.release().ok());
  proxy_->hold_next(kToClient, "", t.reply_hold);
  proxy_->hold_next(kToServer, detail::kSemReleaseScript.sha1, t.release_hold);
  const Status s = sem.acquire(&p, slow(Millis(6000)));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << sem.last_error();
  landed();
  expect_truth(p, permit_left(p.token()));
}

TEST_F(LateRequest, ReentrantHandBackLandsAfterTheRetry) {
  const HandBackTiming t;
  open_proxied(t.command_timeout);
  ReentrantLock lock(conn_);
  ReentrantLockOptions o;
  o.ttl = t.ttl;
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());
  proxy_->hold_next(kToClient, "", t.reply_hold);
  proxy_->hold_next(kToServer, detail::kReentrantReleaseScript.sha1, t.release_hold);
  const Status s = lock.acquire(slow(Millis(6000)));
  ASSERT_TRUE(s.ok()) << s.to_string() << " " << lock.last_error();
  landed();
  expect_truth(lock, grant_left(lock));
}

// --- Nothing is claimed under a token once a release of it was sent: an
// extend after a release whose outcome is unknown is refused (else the
// late delete would land on a lease the extend claimed).

TEST_F(LateRequest, LockExtendAfterAnUnknownRelease) {
  open_proxied(slow(Millis(250)));
  Lock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), LockOptions{slow_ms(10000)}).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->hold_next(kToServer, detail::kReleaseScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(lock.release().ok());
  EXPECT_EQ(lock.extend(slow_ms(10000)).code(), ErrorCode::kNotHeld);
  EXPECT_FALSE(lock.held());
  landed();
  EXPECT_EQ(pttl(), -2) << "the late release still cleans up";
}

TEST_F(LateRequest, PermitExtendAfterAnUnknownRelease) {
  open_proxied(slow(Millis(250)));
  Semaphore sem(conn_);
  ASSERT_TRUE(sem.init(Bytes::from_cstr(kKey)).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok());
  proxy_->hold_next(kToServer, detail::kSemReleaseScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(p.release().ok());
  EXPECT_EQ(p.extend(slow_ms(10000)).code(), ErrorCode::kNotHeld);
  EXPECT_FALSE(p.held());
  landed();
  EXPECT_EQ(permit_left(p.token()), -1);
}

TEST_F(LateRequest, FairLockExtendAfterAnUnknownRelease) {
  open_proxied(slow(Millis(250)));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->hold_next(kToServer, detail::kFairReleaseScript.sha1, slow(Millis(1000)));
  EXPECT_FALSE(lock.release().ok());
  EXPECT_EQ(lock.extend(slow_ms(10000)).code(), ErrorCode::kNotHeld);
  landed();
  EXPECT_EQ(pttl(), -2);
}

// --- Fences stay exact: past 2^53 - 1 a Lua number would round and two
// grants could share a fence, so the grant is refused before it writes.

constexpr const char* kBeforeLast = "9007199254740990";  // 2^53 - 2

TEST_F(LateRequest, LockFenceStopsAtTwoToThe53) {
  Lock lock(rival_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey)).ok());
  ASSERT_EQ(run(admin_, {"SET", "{late}:fence", kBeforeLast}), "OK");
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  EXPECT_EQ(lock.fence(), 9007199254740991u);
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(pttl(), -2) << "no lock key written";
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError) << "the counter is spent";
  EXPECT_EQ(pttl(), -2);
}

TEST_F(LateRequest, FairLockFenceStopsAtTwoToThe53) {
  FairLock lock(rival_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey)).ok());
  ASSERT_EQ(run(admin_, {"SET", "{late}:fence", "9007199254740991"}), "OK");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(pttl(), -2) << "nothing written";
}

}  // namespace
}  // namespace edgelock
