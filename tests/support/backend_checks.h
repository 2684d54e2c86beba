#pragma once
// Test support: every primitive (Lock, ReentrantLock, Semaphore,
// RateLimiter with limit 1 and 2) through any back end (a Connection, Sentinel, Cluster), as two
// clients on the same key: grant, busy, extend, renew and release. Keys are
// "{tag}lock", "{tag}sem", ...: one hash tag, so a cluster test picks the
// node by the tag.

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "edgelock/edgelock.h"

namespace edgelock {
namespace test {

inline std::string tagged(const std::string& tag, const char* what) {
  return "{" + tag + "}" + what;
}
inline Bytes bytes_of(const std::string& s) { return Bytes(s.data(), s.size()); }

// The counters of the connection serving `key` through `b` (every handle
// counts there): what they gained since this was made.
class Counted {
 public:
  Counted(Backend& b, const std::string& key) : b_(b), key_(key), at_(now()) {}
  uint32_t grants() const { return now().grants - at_.grants; }
  uint32_t busy() const { return now().busy - at_.busy; }

 private:
  Metrics now() const { return b_.connection_for(bytes_of(key_)).metrics(); }
  Backend& b_;
  std::string key_;
  Metrics at_;
};

inline void check_lock(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "lock");
  const Counted ours(mine, key), others(theirs, key);
  Lock a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key)).ok());
  ASSERT_TRUE(b.init(bytes_of(key)).ok());
  ASSERT_TRUE(a.try_acquire().ok()) << key << ": " << a.last_error();
  EXPECT_GE(a.fence(), 1u);
  EXPECT_EQ(b.try_acquire().code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_GT(b.busy_ttl(), Millis(0));
  EXPECT_TRUE(a.extend(Millis(20000)).ok()) << a.last_error();
  EXPECT_GT(a.remaining(), Millis(15000));
  EXPECT_TRUE(a.renew().ok()) << a.last_error();
  EXPECT_GT(a.remaining(), Millis(15000)) << "a renewal never shortens the lease";
  const Result<bool> owned = a.owned();
  EXPECT_TRUE(owned.ok() && owned.value());
  ASSERT_TRUE(a.release().ok()) << a.last_error();
  EXPECT_FALSE(a.held());
  ASSERT_TRUE(b.try_acquire().ok()) << b.last_error();
  EXPECT_GT(b.fence(), a.fence()) << "the fence counter lives with the key";
  ASSERT_TRUE(b.release().ok());
  EXPECT_EQ(ours.grants(), 1u);
  EXPECT_EQ(others.busy(), 1u);
  EXPECT_EQ(others.grants(), 1u);
}

inline void check_reentrant(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "reentrant");
  const Counted ours(mine, key);
  ReentrantLock a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key)).ok());
  ASSERT_TRUE(b.init(bytes_of(key)).ok());
  ASSERT_TRUE(a.try_acquire().ok()) << key << ": " << a.last_error();
  ASSERT_TRUE(a.acquire(Millis(1000)).ok()) << a.last_error();
  EXPECT_EQ(a.depth(), 2u);
  EXPECT_EQ(b.try_acquire().code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_TRUE(a.extend(Millis(20000)).ok()) << a.last_error();
  EXPECT_GT(a.remaining(), Millis(15000));
  EXPECT_TRUE(a.renew().ok()) << a.last_error();
  ASSERT_TRUE(a.release().ok()) << a.last_error();
  EXPECT_EQ(a.depth(), 1u);
  EXPECT_EQ(b.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(a.release().ok()) << a.last_error();
  EXPECT_FALSE(a.held());
  ASSERT_TRUE(b.try_acquire().ok()) << b.last_error();
  EXPECT_GT(b.fence(), a.fence());
  ASSERT_TRUE(b.release().ok());
  EXPECT_EQ(ours.grants(), 2u);
}

inline void check_semaphore(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "sem");
  SemaphoreOptions o;
  o.permits = 1;
  const Counted ours(mine, key);
  Semaphore a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key), o).ok());
  ASSERT_TRUE(b.init(bytes_of(key), o).ok());
  Permit p, q;
  ASSERT_TRUE(a.try_acquire(&p).ok()) << key << ": " << a.last_error();
  EXPECT_TRUE(p.key().equals(bytes_of(key))) << "bound to the semaphore that granted it";
  EXPECT_EQ(b.try_acquire(&q).code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_GT(b.busy_ttl(), Millis(0));
  EXPECT_TRUE(p.extend(Millis(20000)).ok()) << p.last_error();
  EXPECT_GT(p.remaining(), Millis(15000));
  EXPECT_TRUE(p.renew().ok()) << p.last_error();
  EXPECT_LE(p.remaining(), Millis(10000));
  const Result<uint32_t> used = b.in_use();
  ASSERT_TRUE(used.ok()) << b.last_error();
  EXPECT_EQ(used.value(), 1u);
  ASSERT_TRUE(p.release().ok()) << p.last_error();
  EXPECT_FALSE(p.held());
  ASSERT_TRUE(b.acquire(&q, Millis(1000)).ok()) << b.last_error();
  ASSERT_TRUE(q.release().ok());
  EXPECT_EQ(ours.grants(), 1u);
}

inline void check_rate_limiter_one(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "cooldown");
  RateLimiterOptions o;
  o.window = Millis(60000);
  o.local_hint = false;  // every answer from the server
  const Counted ours(mine, key);
  RateLimiter a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key), o).ok());
  ASSERT_TRUE(b.init(bytes_of(key), o).ok());
  Admission adm;
  ASSERT_TRUE(a.try_acquire(&adm).ok()) << key << ": " << a.last_error();
  EXPECT_EQ(adm.retry_after, Millis(60000));
  EXPECT_EQ(b.try_acquire(&adm).code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_GT(adm.retry_after, Millis(50000));
  const Result<Admission> left = b.peek();
  ASSERT_TRUE(left.ok()) << b.last_error();
  EXPECT_GT(left.value().retry_after, Millis(50000));
  EXPECT_FALSE(left.value().allowed);
  ASSERT_TRUE(a.erase_on_server().ok()) << a.last_error();
  ASSERT_TRUE(b.try_acquire().ok()) << b.last_error();
  ASSERT_TRUE(b.erase_on_server().ok());
  EXPECT_EQ(ours.grants(), 1u);
}

inline void check_rate_limiter(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "quota");
  RateLimiterOptions o;
  o.limit = 2;
  o.window = Millis(60000);
  o.local_hint = false;  // every answer from the server
  RateLimiter a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key), o).ok());
  ASSERT_TRUE(b.init(bytes_of(key), o).ok());
  Admission adm;
  ASSERT_TRUE(a.try_acquire(&adm).ok()) << key << ": " << a.last_error();
  EXPECT_EQ(adm.remaining, 1);
  ASSERT_TRUE(b.acquire(Millis(100), &adm).ok()) << b.last_error();
  EXPECT_EQ(adm.remaining, 0);
  EXPECT_EQ(a.try_acquire(&adm).code(), ErrorCode::kBusy) << a.last_error();
  EXPECT_GT(adm.retry_after, Millis(50000));
  const Result<Admission> peek = b.peek();
  ASSERT_TRUE(peek.ok()) << b.last_error();
  EXPECT_FALSE(peek.value().allowed);
  ASSERT_TRUE(b.erase_on_server().ok()) << b.last_error();
  ASSERT_TRUE(a.try_acquire().ok()) << a.last_error();
  ASSERT_TRUE(a.erase_on_server().ok());
}

/// All of the above on keys tagged `tag`.
// The fair lock: a grant, a busy waiter that gives up (and leaves the
// queue), then a waiter blocked on its wake list (a BLPOP routed by the
// lock key) granted by the release.
inline void check_fair(Backend& mine, Backend& theirs, const std::string& tag) {
  const std::string key = tagged(tag, "fair");
  FairLock a(mine), b(theirs);
  ASSERT_TRUE(a.init(bytes_of(key)).ok());
  ASSERT_TRUE(b.init(bytes_of(key)).ok());
  ASSERT_TRUE(a.try_acquire().ok()) << key << ": " << a.last_error();
  EXPECT_EQ(b.acquire(Millis(50)).code(), ErrorCode::kBusy) << b.last_error();
  EXPECT_TRUE(a.renew().ok()) << a.last_error();
  Status got = ErrorCode::kInvalidArgument;
  std::thread waiter([&] { got = b.acquire(Millis(10000)); });
  mine.clock().sleep_for(Millis(100));
  ASSERT_TRUE(a.release().ok()) << a.last_error();
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.to_string() << " " << b.last_error();
  EXPECT_GT(b.fence(), a.fence()) << "the fence counter lives with the key";
  ASSERT_TRUE(b.release().ok()) << b.last_error();
}

inline void check_every_primitive(Backend& mine, Backend& theirs, const std::string& tag) {
  check_lock(mine, theirs, tag);
  check_fair(mine, theirs, tag);
  check_reentrant(mine, theirs, tag);
  check_semaphore(mine, theirs, tag);
  check_rate_limiter_one(mine, theirs, tag);
  check_rate_limiter(mine, theirs, tag);
}

}  // namespace test
}  // namespace edgelock
