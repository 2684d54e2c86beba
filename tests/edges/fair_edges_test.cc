// Timing-edge tests for FairLock, the lease invariant of every lock: never
// claim a lease the server may not hold; on an unknown outcome hold less
// but keep the token for cleanup. Against a real redis-server, through
// test::DelayProxy where a reply must arrive late or be lost. Plus the
// queue's own edges: a retried join keeps its place, companion keys of the
// wrong type, and companion names unique per key.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/edgelock.h"
#include "fair_scripts.h"
#include "lock_keys.h"
#include "lock_scripts.h"

namespace edgelock {
namespace {

using test::DelayProxy;
using test::run;

constexpr const char* kKey = "edge";

Nanos slow(Nanos t) { return t * test::slowdown(); }
int64_t slow_ms(int64_t ms) { return ms * test::slowdown(); }
TimePoint now() { return default_clock().now(); }
void sleep_for(Nanos t) { std::this_thread::sleep_for(std::chrono::nanoseconds(t)); }

// The waiter timeout scales with the slowdown: a join's retry after a
// lost reply must land before the place lapses, under qemu too.
FairLockOptions ttl(int64_t ms) {
  FairLockOptions o;
  o.ttl = Millis(ms);
  o.waiter_timeout = Millis(slow_ms(2000));
  return o;
}

// Per test: the suite's server, flushed, every fair script cached (a
// request lost in the proxy must be one that runs, not an EVALSHA answered
// with NOSCRIPT); conn_ reaches it through a DelayProxy, other_ and admin_
// directly.
class FairEdges : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    proxy_.reset(new DelayProxy(server_->port(), Nanos::zero()));
    ASSERT_TRUE(proxy_->start());
    ASSERT_TRUE(test::open(other_, server_->url()));
    ASSERT_TRUE(test::open(admin_, server_->url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
    for (const Script* sc :
         {&detail::kFairAcquireScript, &detail::kFairReleaseScript, &detail::kFairLeaveScript,
          &detail::kFairWakeScript, &detail::kExtendScript, &detail::kOwnedScript}) {
      ASSERT_EQ(run(admin_, {"SCRIPT", "LOAD", std::string(sc->body, sc->len)}), sc->sha1);
    }
  }

  bool open_proxied(Nanos timeout) {
    ConnectionOptions o;
    o.connect_timeout = slow(Millis(2000));
    o.command_timeout = timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    return conn_.setup(proxy_->url().c_str(), o).ok();
  }

  static void warm(FairLock& lock) {
    ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
    ASSERT_TRUE(lock.renew().ok()) << lock.last_error();
    ASSERT_TRUE(lock.release().ok()) << lock.last_error();
    lock.reset_metrics();
  }

  std::string exists(const std::string& key) { return run(admin_, {"EXISTS", key}); }
  std::string token_of(const FairLock& l) {
    return std::string(reinterpret_cast<const char*>(l.token().data), l.token().size);
  }

  std::unique_ptr<DelayProxy> proxy_;
  Connection conn_, other_, admin_;
};

// A grant that arrives after its validity is handed back; the retry
// (same token) is granted and leaves a lock that can be checked and
// released.
TEST_F(FairEdges, LateGrantLeavesAUsableLock) {
  ASSERT_TRUE(open_proxied(slow(Millis(2000))));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(200))).ok());
  warm(lock);
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
  EXPECT_TRUE(lock.release().ok());
  EXPECT_EQ(exists(kKey), "0");
}

// A renewal whose reply does not come stops at the end of the local
// validity and then reports not held, token kept.
TEST_F(FairEdges, ExtendStopsAtTheValidityEnd) {
  ASSERT_TRUE(open_proxied(slow(Millis(2000))));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(400))).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  sleep_for(slow(Millis(100)));
  const Nanos left = lock.remaining();
  proxy_->set_delay(slow(Millis(3000)));
  const TimePoint t0 = now();
  const Status s = lock.extend(Millis(slow_ms(1000)));
  const Nanos took = now() - t0;
  EXPECT_FALSE(s.ok());
  EXPECT_LE(took, left + slow(Millis(50))) << "waited past the validity end";
  EXPECT_FALSE(lock.held());
  EXPECT_GT(lock.token().size, 0u) << "the token is kept for release()";
}

// A shortening extend whose reply is lost shortens the local validity: once
// a rival (queued, fair) holds the key, we must not report held().
TEST_F(FairEdges, LostShortExtendNeverCutsTheLease) {
  ASSERT_TRUE(open_proxied(slow(Millis(500))));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(10000))).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->set_delay(slow(Millis(400)));
  EXPECT_EQ(lock.extend(Millis(slow_ms(300)), ExtendMode::kReplace).code(), ErrorCode::kTimeout);
  EXPECT_LE(lock.remaining(), slow(Millis(300)));
  proxy_->set_delay(Nanos::zero());
  ASSERT_TRUE(proxy_->wait_idle(slow(Millis(3000))));
  // Cut to the 300 ms asked, it would be gone or below 600 ms by now.
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", kKey})), 2 * slow_ms(300))
      << "the late extend cut the lease";
  FairLock rival(other_);
  ASSERT_TRUE(rival.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  EXPECT_EQ(rival.try_acquire().code(), ErrorCode::kBusy);
}

// A release whose outcome is unknown means not held, with the token kept so
// release() can be retried.
TEST_F(FairEdges, UnknownReleaseIsNotHeld) {
  ASSERT_TRUE(open_proxied(slow(Millis(300))));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  warm(lock);
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy_->set_delay(slow(Millis(5000)));
  EXPECT_EQ(lock.release().code(), ErrorCode::kTimeout);
  EXPECT_FALSE(lock.held());
  proxy_->set_delay(Nanos::zero());
  const Status again = lock.release();
  EXPECT_TRUE(again.ok()) << again.to_string() << " " << lock.last_error();
  EXPECT_EQ(exists(kKey), "0");
}

// An acquire that ends in kTimeout after its grant may have landed keeps
// the token, so release() removes the key (a late grant handed back, then
// the retry's reply lost).
TEST_F(FairEdges, FailedAcquireKeepsTokenForCleanup) {
  ASSERT_TRUE(open_proxied(slow(Millis(600))));
  FairLock lock(conn_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(slow_ms(200))).ok());
  warm(lock);
  proxy_->set_delay(slow(Millis(250)));
  std::thread worse([this] {
    sleep_for(slow(Millis(875)));
    proxy_->set_delay(slow(Millis(2000)));
  });
  const Status s = lock.acquire(slow(Millis(1200)));
  worse.join();
  EXPECT_EQ(s.code(), ErrorCode::kTimeout) << s.to_string();
  EXPECT_FALSE(lock.held());
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
}

// A join whose reply is lost is retried with the same token: the waiter
// keeps its place ahead of one that joined after it.
TEST_F(FairEdges, RetriedJoinKeepsItsPlace) {
  ASSERT_TRUE(open_proxied(slow(Millis(300))));
  FairLock holder(admin_), first(conn_), second(other_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(first.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_TRUE(second.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  warm(first);
  ASSERT_TRUE(holder.try_acquire().ok());
  // first's join lands at 200 ms; its reply would come at 400, after its
  // 300 ms command timeout: lost. second joins at 250 ms; first retries
  // (same token) after its timeout.
  proxy_->set_delay(slow(Millis(200)));
  std::atomic<int> order{0};
  std::atomic<int> first_turn{-1}, second_turn{-1};
  std::thread a([&] {
    if (first.acquire(slow(Millis(8000))).ok()) {
      first_turn = order.fetch_add(1);
      first.release().ignore();
    }
  });
  sleep_for(slow(Millis(250)));
  proxy_->set_delay(Nanos::zero());
  std::thread b([&] {
    if (second.acquire(slow(Millis(8000))).ok()) {
      second_turn = order.fetch_add(1);
      second.release().ignore();
    }
  });
  sleep_for(slow(Millis(700)));  // first has timed out and retried by now
  EXPECT_GE(first.metrics().attempts, 2u) << "the join's reply was meant to be lost";
  ASSERT_TRUE(holder.release().ok());
  a.join();
  b.join();
  EXPECT_EQ(first_turn.load(), 0) << "the retried join lost its place";
  EXPECT_EQ(second_turn.load(), 1);
}

// A fence counter that cannot be incremented fails the grant with the lock
// key unset.
TEST_F(FairEdges, UnusableFenceCounterSetsNothing) {
  FairLock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_EQ(run(admin_, {"RPUSH", "{edge}:fence", "x"}), "1");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_NE(std::string(lock.last_error()).find("fence"), std::string::npos) << lock.last_error();
  EXPECT_EQ(exists(kKey), "0");
  EXPECT_FALSE(lock.held());
  ASSERT_EQ(run(admin_, {"DEL", "{edge}:fence"}), "1");
  ASSERT_EQ(run(admin_, {"SET", "{edge}:fence", "9223372036854775807"}), "OK");
  EXPECT_EQ(lock.acquire(Millis(200)).code(), ErrorCode::kServerError);
  EXPECT_EQ(exists(kKey), "0");
}

// A queue key of another type fails closed (no grant); a waiter's wake
// list of another type does not split the release: the key is deleted and
// the waiter still gets its turn at its cap.
TEST_F(FairEdges, WrongTypeCompanions) {
  FairLock lock(other_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr(kKey), ttl(10000)).ok());
  ASSERT_EQ(run(admin_, {"SET", "{edge}:queue", "not-a-hash"}), "OK");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(exists(kKey), "0");
  ASSERT_EQ(run(admin_, {"DEL", "{edge}:queue"}), "1");

  FairLockOptions o = ttl(10000);
  o.waiter_timeout = Millis(slow_ms(600));  // the waiter's cap: 300 ms
  FairLock holder(admin_), waiter(other_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(waiter.init(Bytes::from_cstr(kKey), o).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"SET", "{edge}:w:1", "not-a-list"}), "OK");
  Status got = ErrorCode::kInvalidArgument;
  std::thread t([&] { got = waiter.acquire(slow(Millis(5000))); });
  sleep_for(slow(Millis(50)));
  const Status r = holder.release();
  EXPECT_TRUE(r.ok()) << r.to_string() << " " << holder.last_error();
  EXPECT_EQ(run(admin_, {"GET", "{edge}:w:1"}), "not-a-list");
  t.join();
  EXPECT_TRUE(got.ok()) << got.to_string() << " " << waiter.last_error();
  EXPECT_TRUE(waiter.release().ok());
}

// Companion names: unique per key and suffix, in the key's slot, never one
// of the lock keys; the fair ones beside Lock's.
TEST(FairKeys, CompanionNamesAreUniquePerKey) {
  auto name = [](const std::string& key, const char* suffix) {
    uint8_t out[kMaxKeyLen + 32];
    const Result<size_t> r =
        detail::companion_key(Bytes(key.data(), key.size()), suffix, out, sizeof out);
    return r.ok() ? std::string(reinterpret_cast<char*>(out), r.value()) : std::string("<error>");
  };
  const char* const keys[] = {"foo",   "{foo}", "{foo}:", "foo}", "{foo}}",
                              "a{b}c", "{}",    "{7}",    "foo:w"};
  const char* const suffixes[] = {":fence", ":wake", ":queue", ":w:1", ":w:12", ":w:2"};
  for (const char* s1 : suffixes) {
    for (const char* k1 : keys) {
      const std::string c1 = name(k1, s1);
      ASSERT_NE(c1, "<error>") << k1;
      if (std::string(k1) != "foo}" && std::string(k1) != "{}") {
        EXPECT_EQ(key_slot(Bytes::from_cstr(k1)), key_slot(Bytes(c1.data(), c1.size())))
            << k1 << s1;
      }
      for (const char* k2 : keys) {
        for (const char* s2 : suffixes) {
          if (std::string(k1) == k2 && std::string(s1) == s2) continue;
          EXPECT_NE(c1, name(k2, s2)) << k1 << s1 << " vs " << k2 << s2;
        }
        EXPECT_NE(c1, k2) << "a companion is never one of these lock keys";
      }
    }
  }
  EXPECT_EQ(name("foo", ":queue"), "{foo}:queue");
  EXPECT_EQ(name("foo", ":w:7"), "{foo}:w:7");
  EXPECT_EQ(name("{foo}", ":w:7"), "w:7:{foo}");
}

}  // namespace
}  // namespace edgelock
