// Timing-edge tests of FairLock's queue (the lease invariant it shares
// with Lock is in lease_edges): a retried join keeps its place, companion
// keys of the wrong type, and companion names unique per key. Against a
// real redis-server, through test::DelayProxy where a reply must be lost.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/lock_keys.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/edgelock.h"
#include "proxied_edges.h"

namespace edgelock {
namespace {

using namespace edges;  // NOLINT(google-build-using-namespace): the fixture's helpers
using test::run;

// The waiter timeout scales with the slowdown: a join's retry after a
// lost reply must land before the place lapses, under qemu too.
FairLockOptions ttl(int64_t ms) {
  FairLockOptions o;
  o.ttl = Millis(ms);
  o.waiter_timeout = Millis(slow_ms(2000));
  return o;
}

// The proxied fixture with every fair script cached.
class FairEdges : public ProxiedEdges {
 protected:
  void SetUp() override {
    ProxiedEdges::SetUp();
    if (HasFatalFailure()) return;
    load_fair_scripts(admin_);
  }
};

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
  EXPECT_GE(attempts(), 2u) << "the join's reply was meant to be lost";
  ASSERT_TRUE(holder.release().ok());
  a.join();
  b.join();
  EXPECT_EQ(first_turn.load(), 0) << "the retried join lost its place";
  EXPECT_EQ(second_turn.load(), 1);
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
