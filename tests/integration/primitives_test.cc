// Reentrant lock, rate limiter (limit 1 and M) and metrics against a real
// redis-server.
#include <gtest/gtest.h>

#include <string>

#include "../support/backend_checks.h"
#include "../support/fake_clock.h"
#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::run;

class PrimitivesTest : public test::SharedServerTest {
 protected:
  static ReentrantLockOptions rttl(int64_t ms) {
    ReentrantLockOptions o;
    o.ttl = Millis(ms);
    return o;
  }
  int pttl(const std::string& key) { return std::stoi(run(admin_, {"PTTL", key})); }
};

// Every primitive over a plain Connection (the Backend the Sentinel and
// Cluster tests run the same checks through).
TEST_F(PrimitivesTest, EveryPrimitiveOnAConnection) {
  test::check_every_primitive(a_, b_, "conn");
  EXPECT_EQ(run(admin_, {"EXISTS", "{conn}lock:fence"}), "1");
  EXPECT_EQ(run(admin_, {"EXISTS", "{conn}reentrant:fence"}), "1");
}

// --- Reentrant lock -------------------------------------------------------

TEST_F(PrimitivesTest, ReentrantDepthAndTtlRefresh) {
  ReentrantLock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("bus"), rttl(5000), Bytes::from_cstr("task:bus")).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << a_.last_error();
  const uint64_t fence = lock.fence();
  EXPECT_GE(fence, 1u);
  EXPECT_EQ(run(admin_, {"HGET", "bus", "owner"}), "task:bus");
  // Re-entry refreshes the TTL: shorten it behind the lock's back first.
  ASSERT_EQ(run(admin_, {"PEXPIRE", "bus", "1000"}), "1");
  ASSERT_TRUE(lock.acquire(Millis(1000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_EQ(lock.depth(), 3u);
  EXPECT_EQ(run(admin_, {"HGET", "bus", "depth"}), "3");
  EXPECT_GT(pttl("bus"), 4000);
  EXPECT_EQ(lock.fence(), fence) << "re-entry keeps the grant's fence";
  EXPECT_TRUE(lock.held());
  // Release as many times as acquired; the key lives until the last one.
  ASSERT_TRUE(lock.release().ok());
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(lock.depth(), 1u);
  EXPECT_EQ(run(admin_, {"HGET", "bus", "depth"}), "1");
  EXPECT_TRUE(lock.held());
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "bus"}), "0");
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld);
  // A new grant gets a higher fence.
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_GT(lock.fence(), fence);
  ASSERT_TRUE(lock.release().ok());
}

TEST_F(PrimitivesTest, ReentrantOtherOwnerIsBusyAndCannotTouchIt) {
  ReentrantLock mine(a_), other(b_), twin(b_);
  ASSERT_TRUE(mine.init(Bytes::from_cstr("i2c"), rttl(5000), Bytes::from_cstr("me")).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("i2c"), rttl(5000), Bytes::from_cstr("you")).ok());
  // Same owner id, another handle (e.g. the task restarted): still busy.
  ASSERT_TRUE(twin.init(Bytes::from_cstr("i2c"), rttl(5000), Bytes::from_cstr("me")).ok());
  ASSERT_TRUE(mine.try_acquire().ok());
  ASSERT_TRUE(mine.try_acquire().ok());
  EXPECT_EQ(other.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_GT(other.busy_ttl(), Millis(4000));
  EXPECT_EQ(twin.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(other.release().code(), ErrorCode::kNotHeld);
  EXPECT_EQ(other.extend(Millis(1000)).code(), ErrorCode::kNotHeld);
  EXPECT_EQ(run(admin_, {"HGET", "i2c", "depth"}), "2");

  // Server-side owner check: `other` held it once, lost it (deleted as if
  // expired), and `mine` took it. other's release/extend must not touch it.
  ASSERT_TRUE(mine.release().ok());
  ASSERT_TRUE(mine.release().ok());
  ASSERT_TRUE(other.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"DEL", "i2c"}), "1");
  ASSERT_TRUE(mine.try_acquire().ok());
  EXPECT_EQ(other.extend(Millis(60000)).code(), ErrorCode::kNotOwner);
  EXPECT_EQ(other.depth(), 0u) << "a lost lease forgets every level";
  ASSERT_TRUE(other.try_acquire().code() == ErrorCode::kBusy);
  EXPECT_LE(pttl("i2c"), 5000) << "other's extend did not change mine";
  EXPECT_EQ(run(admin_, {"HGET", "i2c", "owner"}), "me");
  ASSERT_TRUE(mine.release().ok());
}

TEST_F(PrimitivesTest, ReentrantReleaseOfLostLeaseIsNotOwner) {
  ReentrantLock old_holder(a_), new_holder(b_);
  ASSERT_TRUE(old_holder.init(Bytes::from_cstr("spi"), rttl(5000)).ok());
  ASSERT_TRUE(new_holder.init(Bytes::from_cstr("spi"), rttl(5000)).ok());
  EXPECT_EQ(old_holder.owner().size, 32u) << "generated owner id";
  ASSERT_TRUE(old_holder.try_acquire().ok());
  ASSERT_TRUE(old_holder.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"DEL", "spi"}), "1");  // as if it expired
  ASSERT_TRUE(new_holder.try_acquire().ok());
  EXPECT_EQ(old_holder.release().code(), ErrorCode::kNotOwner);
  EXPECT_EQ(old_holder.depth(), 0u);
  EXPECT_EQ(run(admin_, {"HGET", "spi", "depth"}), "1") << "new holder untouched";
  // Re-entering a lock we lost must not silently re-grant depth 1.
  ASSERT_TRUE(old_holder.try_acquire().code() == ErrorCode::kBusy);
  ASSERT_TRUE(new_holder.release().ok());
  ASSERT_TRUE(old_holder.try_acquire().ok());
  ASSERT_EQ(run(admin_, {"DEL", "spi"}), "1");
  EXPECT_EQ(old_holder.try_acquire().code(), ErrorCode::kNotOwner) << "level 2 on a lost lease";
  EXPECT_EQ(old_holder.depth(), 0u);
}

TEST_F(PrimitivesTest, ReentrantRetryAfterLostReplyIsNotCountedTwice) {
  ReentrantLock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("uart"), rttl(5000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  // As if our second acquire landed but its reply was lost: the server is
  // at depth 2, the handle still at 1. The retry must find it, not add a 3rd.
  ASSERT_EQ(run(admin_, {"HINCRBY", "uart", "depth", "1"}), "2");
  ASSERT_TRUE(lock.try_acquire().ok());
  EXPECT_EQ(lock.depth(), 2u);
  EXPECT_EQ(run(admin_, {"HGET", "uart", "depth"}), "2");
  // Same for a release whose reply was lost.
  ASSERT_EQ(run(admin_, {"HSET", "uart", "depth", "1"}), "0");
  ASSERT_TRUE(lock.release().ok());
  EXPECT_EQ(lock.depth(), 1u);
  EXPECT_EQ(run(admin_, {"HGET", "uart", "depth"}), "1");
  // A depth that moved any other way is not ours to guess about.
  ASSERT_EQ(run(admin_, {"HSET", "uart", "depth", "7"}), "0");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kNotOwner);
  EXPECT_EQ(lock.depth(), 0u);
}

TEST_F(PrimitivesTest, ReentrantWorksWithLockGuard) {
  ReentrantLock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("guarded"), rttl(5000)).ok());
  {
    ASSERT_TRUE(lock.try_acquire().ok());
    LockGuard outer(lock);
    {
      ASSERT_TRUE(lock.try_acquire().ok());
      LockGuard inner(lock);
      EXPECT_EQ(lock.depth(), 2u);
    }
    EXPECT_EQ(lock.depth(), 1u);
    EXPECT_EQ(run(admin_, {"EXISTS", "guarded"}), "1");
  }
  EXPECT_EQ(lock.depth(), 0u);
  EXPECT_EQ(run(admin_, {"EXISTS", "guarded"}), "0");
}

// --- RateLimiter, limit 1 (a cooldown) -------------------------------------

TEST_F(PrimitivesTest, RateLimiterLimitOneExactSequenceRealTtl) {
  const int64_t window = 300 * test::slowdown();  // real TTL: stretch under qemu
  RateLimiter cd(a_), peer(b_);
  RateLimiterOptions o;
  o.window = Millis(window);
  o.local_hint = false;  // server answers only: real TTLs decide
  ASSERT_TRUE(cd.init(Bytes::from_cstr("modem-reset"), o).ok());
  ASSERT_TRUE(peer.init(Bytes::from_cstr("modem-reset"), o).ok());
  Admission adm;
  ASSERT_TRUE(cd.try_acquire(&adm).ok());
  EXPECT_TRUE(adm.allowed);
  EXPECT_EQ(adm.retry_after, Millis(window));
  EXPECT_EQ(adm.remaining, 0);
  EXPECT_EQ(cd.try_acquire(&adm).code(), ErrorCode::kBusy);
  EXPECT_FALSE(adm.allowed);
  EXPECT_GT(adm.retry_after, Millis(0));
  EXPECT_LE(adm.retry_after, Millis(window));
  EXPECT_EQ(peer.try_acquire(&adm).code(), ErrorCode::kBusy) << "the window is shared";
  SystemClock().sleep_for(adm.retry_after + Millis(20));
  ASSERT_TRUE(peer.try_acquire(&adm).ok()) << "allowed again once the server TTL ran out";
  EXPECT_EQ(cd.try_acquire().code(), ErrorCode::kBusy);
  const Result<Admission> after = cd.peek();
  ASSERT_TRUE(after.ok());
  EXPECT_GT(after.value().retry_after, Millis(0));
  EXPECT_FALSE(after.value().allowed);
  EXPECT_EQ(after.value().remaining, 0);
  // acquire() waits out the window (bounded by its wait).
  ASSERT_TRUE(cd.acquire(Millis(2000) * test::slowdown(), &adm).ok());
  EXPECT_EQ(cd.acquire(Millis(50)).code(), ErrorCode::kBusy) << "wait shorter than the window";
  ASSERT_TRUE(cd.erase_on_server().ok());
  EXPECT_TRUE(peer.try_acquire().ok());
}

TEST_F(PrimitivesTest, RateLimiterLimitOneLocalHintUsesClientClockServerStillDecides) {
  FakeClock clock;
  Connection conn;
  ASSERT_TRUE(test::open(conn, server_->url(), &clock));
  RateLimiter cd(conn);
  RateLimiterOptions o;
  o.window = Millis(60000);
  ASSERT_TRUE(cd.init(Bytes::from_cstr("power-cycle"), o).ok());
  Admission adm;
  ASSERT_TRUE(cd.try_acquire(&adm).ok());
  const uint32_t commands = conn.stats().commands;
  // Refused locally, no round trip, retry_after from the fake clock.
  EXPECT_EQ(cd.try_acquire(&adm).code(), ErrorCode::kBusy);
  EXPECT_TRUE(adm.local);
  EXPECT_EQ(adm.retry_after, Millis(60000 - 600 - 2));  // drift 1% + 2 ms
  clock.advance(Millis(30000));
  EXPECT_EQ(cd.try_acquire(&adm).code(), ErrorCode::kBusy);
  EXPECT_EQ(adm.retry_after, Millis(30000 - 600 - 2));
  EXPECT_EQ(conn.stats().commands, commands);
  // Past the hint the server is asked: its key (real time) still lives.
  clock.advance(Millis(30000));
  EXPECT_EQ(cd.try_acquire(&adm).code(), ErrorCode::kBusy);
  EXPECT_FALSE(adm.local);
  EXPECT_GT(adm.retry_after, Millis(55000));
  EXPECT_EQ(conn.stats().commands, commands + 1);
  // The hint never allows on its own: after an operator reset the next
  // attempt past the hint goes to the server and is allowed.
  ASSERT_EQ(run(admin_, {"DEL", "power-cycle"}), "1");
  clock.advance(adm.retry_after);
  EXPECT_TRUE(cd.try_acquire(&adm).ok());
  // The limiter alone uses conn: its counters are the limiter's.
  EXPECT_EQ(conn.metrics().attempts, 5u);
  EXPECT_EQ(conn.metrics().grants, 2u);
  EXPECT_EQ(conn.metrics().busy, 3u);
}

// --- RateLimiter, limit M (a quota) ----------------------------------------

TEST_F(PrimitivesTest, RateLimiterExactSequenceRealWindow) {
  const int64_t window = 400 * test::slowdown();
  RateLimiter q(a_), peer(b_);
  RateLimiterOptions o;
  o.limit = 3;
  o.window = Millis(window);
  o.local_hint = false;
  ASSERT_TRUE(q.init(Bytes::from_cstr("downloads"), o).ok());
  ASSERT_TRUE(peer.init(Bytes::from_cstr("downloads"), o).ok());
  Admission adm;
  const bool expect[6] = {true, true, true, false, false, false};
  const int64_t left[6] = {2, 1, 0, 0, 0, 0};
  for (int i = 0; i < 6; ++i) {
    RateLimiter& who = i % 2 ? peer : q;  // the window is shared
    const Status s = who.try_acquire(&adm);
    EXPECT_EQ(s.ok(), expect[i]) << i;
    EXPECT_EQ(adm.allowed, expect[i]) << i;
    EXPECT_EQ(adm.remaining, left[i]) << i;
    if (left[i] > 0) {
      EXPECT_EQ(adm.retry_after, Millis(0)) << i;
    } else {
      EXPECT_GT(adm.retry_after, Millis(0)) << i;
      EXPECT_LE(adm.retry_after, Millis(window)) << i;
    }
  }
  EXPECT_EQ(run(admin_, {"GET", "downloads"}), "3") << "refusals are not counted";
  const Result<Admission> p = q.peek();
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p.value().allowed);
  SystemClock().sleep_for(adm.retry_after + Millis(20));
  ASSERT_TRUE(q.try_acquire(&adm).ok()) << "a new window";
  EXPECT_EQ(adm.remaining, 2);
  ASSERT_TRUE(q.acquire(Millis(1000), &adm).ok());
  ASSERT_TRUE(q.acquire(Millis(1000), &adm).ok());
  EXPECT_EQ(q.acquire(Millis(20), &adm).code(), ErrorCode::kBusy);
  ASSERT_TRUE(q.acquire(Millis(2000) * test::slowdown(), &adm).ok()) << "waits for the next window";
  ASSERT_TRUE(q.erase_on_server().ok());
  const Result<Admission> fresh = q.peek();
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh.value().remaining, 3);
}

TEST_F(PrimitivesTest, RateLimiterLocalHintWithFakeClock) {
  FakeClock clock;
  Connection conn;
  ASSERT_TRUE(test::open(conn, server_->url(), &clock));
  RateLimiter q(conn);
  RateLimiterOptions o;
  o.limit = 2;
  o.window = Millis(60000);
  o.drift_factor = 0;
  ASSERT_TRUE(q.init(Bytes::from_cstr("uploads"), o).ok());
  Admission adm;
  ASSERT_TRUE(q.try_acquire(&adm).ok());
  EXPECT_FALSE(adm.local);
  ASSERT_TRUE(q.try_acquire(&adm).ok());
  EXPECT_EQ(adm.remaining, 0);
  EXPECT_GT(adm.retry_after, Millis(59000));
  const uint32_t commands = conn.stats().commands;
  clock.advance(Millis(10000));
  EXPECT_EQ(q.try_acquire(&adm).code(), ErrorCode::kBusy);
  EXPECT_TRUE(adm.local);
  EXPECT_LE(adm.retry_after, Millis(50000 - 2));
  EXPECT_GT(adm.retry_after, Millis(49000));
  EXPECT_EQ(conn.stats().commands, commands);
  clock.advance(Millis(50000));
  EXPECT_EQ(q.try_acquire(&adm).code(), ErrorCode::kBusy) << "server window (real time) still open";
  EXPECT_FALSE(adm.local);
  EXPECT_EQ(run(admin_, {"GET", "uploads"}), "2");
}

// --- Metrics and the event hook ------------------------------------------

struct HookLog {
  int events = 0;
  int busy = 0;
  int reconnects = 0;
  EventKind last = EventKind::kAcquire;
};

void log_event(const Event& e, void* ctx) {
  HookLog* log = static_cast<HookLog*>(ctx);
  ++log->events;
  log->last = e.kind;
  if (e.status.code() == ErrorCode::kBusy) ++log->busy;
  if (e.kind == EventKind::kReconnect) ++log->reconnects;
}

// Each lock's operations count in the counters of its own connection.
TEST_F(PrimitivesTest, MetricsCountPerConnection) {
  HookLog log;
  b_.set_event_hook(log_event, &log);
  Lock la(a_), lb(b_);
  ASSERT_TRUE(la.init(Bytes::from_cstr("m")).ok());
  ASSERT_TRUE(lb.init(Bytes::from_cstr("m")).ok());
  ASSERT_TRUE(la.try_acquire().ok());
  EXPECT_EQ(lb.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(lb.try_acquire().code(), ErrorCode::kBusy);
  ASSERT_TRUE(lb.adopt(Bytes::from_cstr("wrong")).ok());
  EXPECT_EQ(lb.release().code(), ErrorCode::kNotOwner);
  ASSERT_TRUE(lb.adopt(Bytes::from_cstr("wrong")).ok());
  EXPECT_EQ(lb.extend(Millis(1000)).code(), ErrorCode::kNotOwner);
  const Metrics& m = b_.metrics();
  EXPECT_EQ(m.attempts, 2u);
  EXPECT_EQ(m.grants, 0u);
  EXPECT_EQ(m.busy, 2u);
  EXPECT_EQ(m.not_owner, 2u);
  EXPECT_EQ(m.lost_leases, 1u) << "extend found the lease gone";
  uint32_t hist = 0;
  for (uint32_t c : m.latency) hist += c;
  EXPECT_EQ(hist, 2u) << "one latency sample per attempt";
  EXPECT_EQ(a_.metrics().attempts, 1u);
  EXPECT_EQ(a_.metrics().grants, 1u);
  EXPECT_EQ(a_.metrics().busy, 0u);
  EXPECT_EQ(log.events, 4);
  EXPECT_EQ(log.busy, 2);
  EXPECT_EQ(log.last, EventKind::kExtend);
  // Reconnects are counted and reported too.
  b_.close();
  ASSERT_EQ(run(b_, {"PING"}), "PONG");
  EXPECT_EQ(b_.metrics().reconnects, 1u);
  EXPECT_EQ(log.reconnects, 1);
  char line[256];
  const Result<size_t> n = format_metrics(b_.metrics(), line, sizeof line);
  ASSERT_TRUE(n.ok());
  EXPECT_NE(std::string(line).find("busy=2 not_owner=2"), std::string::npos) << line;
  EXPECT_NE(std::string(line).find("reconnects=1"), std::string::npos) << line;
  EXPECT_EQ(format_metrics(b_.metrics(), line, 20).status().code(), ErrorCode::kBufferTooSmall);
  b_.set_event_hook(nullptr, nullptr);
  ASSERT_TRUE(la.release().ok());
}

TEST(Metrics, LatencyBuckets) {
  EXPECT_EQ(latency_bucket(Nanos::zero()), 0u);
  EXPECT_EQ(latency_bucket(Millis(1)), 0u);
  EXPECT_EQ(latency_bucket(Millis(1) + Nanos(1)), 1u);
  EXPECT_EQ(latency_bucket(Millis(10)), 3u);
  EXPECT_EQ(latency_bucket(Millis(1000)), kLatencyBuckets - 2);
  EXPECT_EQ(latency_bucket(Millis(5000)), kLatencyBuckets - 1);
  Metrics m;
  m.record(EventKind::kAcquire, ErrorCode::kTimeout, Millis(3000));
  m.record(EventKind::kRelease, ErrorCode::kIo, Nanos::zero());
  m.record(EventKind::kCheck, ErrorCode::kNotOwner, Nanos::zero());
  EXPECT_EQ(m.timeouts, 1u);
  EXPECT_EQ(m.errors, 1u);
  EXPECT_EQ(m.lost_leases, 1u);
  EXPECT_EQ(m.latency[kLatencyBuckets - 1], 1u);
  EXPECT_EQ(sizeof(Metrics), 16 * sizeof(uint32_t)) << "fixed size, no pointers";
}

}  // namespace
}  // namespace edgelock
