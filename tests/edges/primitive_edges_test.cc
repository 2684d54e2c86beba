// Timing-edge tests: primitive. Each test drives one timing edge (a late, lost
// or unknown reply, a frozen server) against a real redis-server (through
// test::DelayProxy where a reply must arrive late or be lost) and asserts
// the lease invariant at the moment that edge could break it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"
#include "lease/rate_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {
namespace {

using test::DelayProxy;
using test::run;

Nanos ms_s(int64_t ms) { return Millis(ms) * test::slowdown(); }  // stretched under qemu
int64_t n_s(int64_t ms) { return ms * test::slowdown(); }
TimePoint now() { return default_clock().now(); }
void sleep_ns(Nanos ns) { default_clock().sleep_for(ns); }

SemaphoreOptions sem_opts(uint32_t permits, int64_t ttl_ms) {
  SemaphoreOptions o;
  o.permits = permits;
  o.ttl = Millis(ttl_ms);
  o.retry_min = Millis(1);
  o.retry_max = Millis(20);
  return o;
}

ReentrantLockOptions re_opts(int64_t ttl_ms) {
  ReentrantLockOptions o;
  o.ttl = Millis(ttl_ms);
  o.retry_min = Millis(1);
  o.retry_max = Millis(20);
  return o;
}

class PrimitiveEdges : public test::SharedServerTest {
 protected:
  // Every script cached on the server first: a request lost in the proxy
  // must be one that runs, not an EVALSHA answered with NOSCRIPT.
  void SetUp() override {
    SharedServerTest::SetUp();
    const Script* all[] = {&detail::kSemAcquireScript,       &detail::kSemReleaseScript,
                           &detail::kSemExtendScript,        &detail::kSemCountScript,
                           &detail::kReentrantAcquireScript, &detail::kReentrantReleaseScript,
                           &detail::kReentrantExtendScript,  &detail::kRateScript};
    for (const Script* sc : all) {
      ASSERT_EQ(run(admin_, {"SCRIPT", "LOAD", std::string(sc->body, sc->len)}), sc->sha1);
    }
  }
  // A connection through `proxy` whose commands give up after `timeout`:
  // a proxy delay longer than that is a lost reply whose command still runs.
  void open_via(Connection& c, const DelayProxy& proxy, Nanos timeout) {
    ConnectionOptions o;
    o.connect_timeout = ms_s(2000);
    o.command_timeout = timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    ASSERT_TRUE(c.init(proxy.url().c_str(), o).ok());
  }
  std::unique_ptr<DelayProxy> start_proxy(Nanos delay) {
    auto p = std::make_unique<DelayProxy>(server_->port(), delay);
    EXPECT_TRUE(p->start());
    return p;
  }
  // Lets every request still held in the proxy reach the server.
  void drain(DelayProxy& proxy) {
    ASSERT_TRUE(proxy.wait_idle(ms_s(5000)));
    proxy.set_delay(Nanos::zero());
  }
  int64_t pttl(const std::string& key) { return std::stoll(run(admin_, {"PTTL", key})); }
  // Ms the server still gives permit `id` of semaphore `key` (its clock).
  int64_t permit_left_ms(const std::string& key, Bytes id) {
    const std::string score =
        run(admin_, {"ZSCORE", key, std::string(reinterpret_cast<const char*>(id.data), id.size)});
    if (score == "(nil)") return -1;
    const std::string t = run(admin_, {"TIME"});
    const size_t sp = t.find(' ');
    const int64_t now_ms = std::stoll(t.substr(0, sp)) * 1000 + std::stoll(t.substr(sp + 1)) / 1000;
    return std::stoll(score) - now_ms;
  }
};

// --- A late grant ----------------------------------------------------------

struct ExpiredCount {
  std::atomic<int> n{0};
  static void hook(const Event& e, void* ctx) {
    if (e.kind == EventKind::kAcquire && e.status.code() == ErrorCode::kExpired) {
      ++static_cast<ExpiredCount*>(ctx)->n;
    }
  }
};

struct Claims {
  std::atomic<int> holders{0};
  std::atomic<int> most{0};
  std::atomic<int> granted{0};
  std::atomic<int> broken{0};  // ok permits that were empty or could not be extended/released
};

void hold_one(Semaphore& sem, Claims& claims) {
  Permit p;
  if (!sem.acquire(&p, ms_s(10000)).ok()) return;
  ++claims.granted;
  const int n = ++claims.holders;
  for (int m = claims.most.load(); n > m && !claims.most.compare_exchange_weak(m, n);) {
  }
  if (p.token().size == 0 || p.remaining() <= Nanos::zero()) ++claims.broken;
  sleep_ns(ms_s(30));                    // well inside the validity: the other must not hold now
  if (!p.renew().ok()) ++claims.broken;  // extends by the semaphore's ttl
  sleep_ns(ms_s(10));
  --claims.holders;
  if (!p.release().ok()) ++claims.broken;
}

TEST_F(PrimitiveEdges, SemaphoreLateGrantNeverMakesTwoHolders) {
  // The script itself refuses an empty permit id (every client sending ""
  // would share one permit).
  const Bytes keys[1] = {Bytes::from_cstr("sem-empty")};
  const Bytes args[3] = {Bytes::from_cstr(""), Bytes::from_cstr("5000"), Bytes::from_cstr("1")};
  const Result<const Reply*> r = admin_.eval({&detail::kSemAcquireScript, keys, args},
                                             Deadline::after(admin_.clock(), ms_s(2000)));
  ASSERT_TRUE(r.ok()) << admin_.last_error();
  ASSERT_EQ(r.value()->type, ReplyType::kArray);
  EXPECT_NE(r.value()->elements[0].integer, 1) << "an empty id was granted";
  EXPECT_EQ(run(admin_, {"EXISTS", "sem-empty"}), "0");

  // Two clients of a 1-permit semaphore whose grants arrive after the
  // permit's validity (round trip 300 ms > TTL 200 ms): each hands its
  // late permit back. Once both have, the delay goes away and they compete.
  const int64_t ttl = n_s(200);
  auto proxy = start_proxy(ms_s(150));
  Connection c1, c2;
  open_via(c1, *proxy, ms_s(2000));
  open_via(c2, *proxy, ms_s(2000));
  ExpiredCount late1, late2;
  c1.set_event_hook(&ExpiredCount::hook, &late1);
  c2.set_event_hook(&ExpiredCount::hook, &late2);
  Semaphore s1(c1), s2(c2);
  ASSERT_TRUE(s1.init(Bytes::from_cstr("sem-late"), sem_opts(1, ttl)).ok());
  ASSERT_TRUE(s2.init(Bytes::from_cstr("sem-late"), sem_opts(1, ttl)).ok());
  Claims claims;
  std::thread t1([&] { hold_one(s1, claims); });
  sleep_ns(ms_s(250));  // s1's late permit has expired on the server by then
  std::thread t2([&] { hold_one(s2, claims); });
  const TimePoint give_up = now() + ms_s(6000);
  while ((late1.n.load() == 0 || late2.n.load() == 0) && now() < give_up) sleep_ns(Millis(5));
  EXPECT_GE(late1.n.load(), 1);
  EXPECT_GE(late2.n.load(), 1);
  proxy->set_delay(Nanos::zero());
  t1.join();
  t2.join();
  EXPECT_LE(claims.most.load(), 1) << "two holders of a 1-permit semaphore at once";
  EXPECT_EQ(claims.granted.load(), 2);
  EXPECT_EQ(claims.broken.load(), 0) << "an ok permit was empty or could not be extended/released";
  EXPECT_EQ(run(admin_, {"ZCARD", "sem-late"}), "0");
}

// --- A renewal ends by the validity ----------------------------------------

TEST_F(PrimitiveEdges, SemaphoreExtendStopsAtValidityEnd) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(2000));
  Semaphore sem(c);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem-stall"), sem_opts(1, n_s(600))).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok()) << c.last_error();
  sleep_ns(p.remaining() - ms_s(300));
  proxy->set_delay(ms_s(700));  // a stalled server: no reply within the validity
  const TimePoint end = now() + p.remaining();
  const Status s = p.extend(Millis(n_s(600)));
  const TimePoint returned = now();
  EXPECT_LE(returned, end + ms_s(50))
      << "extend overran the validity by " << test::ms(returned - end) << " ms";
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(p.remaining(), Nanos::zero());
  EXPECT_GT(p.token().size, 0u) << "the id is kept for release()";
  drain(*proxy);
  const Status rel = p.release();
  EXPECT_TRUE(rel.ok() || rel.code() == ErrorCode::kNotOwner) << rel.to_string();
}

TEST_F(PrimitiveEdges, ReentrantExtendStopsAtValidityEnd) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(2000));
  ReentrantLock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-stall"), re_opts(n_s(600))).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << c.last_error();
  sleep_ns(lock.remaining() - ms_s(300));
  proxy->set_delay(ms_s(700));
  const TimePoint end = now() + lock.remaining();
  const Status s = lock.renew();
  const TimePoint returned = now();
  EXPECT_LE(returned, end + ms_s(50))
      << "renewal overran the validity by " << test::ms(returned - end) << " ms";
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(lock.held());
  drain(*proxy);
  const Status rel = lock.release();
  EXPECT_TRUE(rel.ok() || rel.code() == ErrorCode::kNotOwner) << rel.to_string();
}

// --- An unknown shortening extend ------------------------------------------

TEST_F(PrimitiveEdges, SemaphoreUnknownShorteningExtendShortensValidity) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(300));
  Semaphore sem(c);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem-shorten"), sem_opts(1, 10000)).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok()) << c.last_error();
  proxy->set_delay(ms_s(400));  // reply lost; the server applies the extend
  const TimePoint start = now();
  const int64_t asked = n_s(800);
  EXPECT_FALSE(p.extend(Millis(asked)).ok());
  EXPECT_LE(p.remaining(), Millis(asked) - (now() - start)) << "kept the old, longer validity";
  drain(*proxy);
  const Nanos mine = p.remaining();
  const int64_t server = permit_left_ms("sem-shorten", p.token());
  EXPECT_LE(test::ms(mine), server + 1) << "we claim more than the server holds";
  const Status rel = p.release();
  EXPECT_TRUE(rel.ok() || rel.code() == ErrorCode::kNotOwner) << rel.to_string();
}

TEST_F(PrimitiveEdges, ReentrantUnknownShorteningRenewalShortensValidity) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(300));
  ReentrantLock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-shorten"), re_opts(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << c.last_error();
  proxy->set_delay(ms_s(400));
  const TimePoint start = now();
  const int64_t asked = n_s(800);
  EXPECT_FALSE(lock.extend(Millis(asked)).ok());
  EXPECT_LE(lock.remaining(), Millis(asked) - (now() - start)) << "kept the old, longer validity";
  drain(*proxy);
  const Nanos mine = lock.remaining();
  EXPECT_LE(test::ms(mine), pttl("re-shorten") + 1) << "we claim more than the server holds";
  EXPECT_TRUE(lock.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "re-shorten"}), "0");
}

// --- An ok extend leaves validity ------------------------------------------

TEST_F(PrimitiveEdges, SemaphoreExtendOkMeansValidityLeft) {
  Semaphore sem(a_);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem-tiny"), sem_opts(1, 5000)).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok());
  const Status s = p.extend(Millis(2));  // less than the drift allowance
  EXPECT_FALSE(s.ok() && p.remaining() == Nanos::zero()) << "ok with zero validity";
  EXPECT_EQ(s.code(), ErrorCode::kExpired);
  EXPECT_EQ(p.remaining(), Nanos::zero());
  EXPECT_GT(p.token().size, 0u);
  const Status rel = p.release();
  EXPECT_TRUE(rel.ok() || rel.code() == ErrorCode::kNotOwner) << rel.to_string();
}

TEST_F(PrimitiveEdges, ReentrantRefreshingReleaseOkMeansValidityLeft) {
  // The release that keeps depth > 0 refreshes the TTL; its reply comes
  // after that TTL's validity (round trip 240 ms > 200 ms).
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(2000));
  ReentrantLock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-tiny"), re_opts(n_s(200))).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy->set_delay(ms_s(120));
  const Status s = lock.release();
  EXPECT_FALSE(s.ok() && lock.remaining() == Nanos::zero()) << "ok with zero validity";
  EXPECT_EQ(s.code(), ErrorCode::kExpired);
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.depth(), 0u) << "no level is claimed without validity";
  drain(*proxy);
  const Status rel = lock.release();  // the level left is still ours to clean up
  EXPECT_TRUE(rel.ok() || rel.code() == ErrorCode::kNotOwner) << rel.to_string();
  // extend(2 ms) is the same: less than the drift allowance.
  ReentrantLock other(a_);
  ASSERT_TRUE(other.init(Bytes::from_cstr("re-tiny2"), re_opts(5000)).ok());
  ASSERT_TRUE(other.try_acquire().ok());
  const Status e = other.extend(Millis(2));
  EXPECT_FALSE(e.ok() && other.remaining() == Nanos::zero()) << "ok with zero validity";
  EXPECT_EQ(e.code(), ErrorCode::kExpired);
  EXPECT_FALSE(other.held());
}

// --- An unknown release ----------------------------------------------------

TEST_F(PrimitiveEdges, SemaphoreUnknownReleaseStopsClaiming) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(300));
  Semaphore sem(c);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem-unrel"), sem_opts(1, 10000)).ok());
  Permit p;
  ASSERT_TRUE(sem.try_acquire(&p).ok()) << c.last_error();
  proxy->set_delay(ms_s(400));  // the release runs; its reply is lost
  const Status s = p.release();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(p.remaining(), Nanos::zero()) << "still claims a permit the server may have dropped";
  EXPECT_GT(p.token().size, 0u) << "the id is kept so release() can be retried";
  drain(*proxy);
  EXPECT_EQ(run(admin_, {"ZCARD", "sem-unrel"}), "0");
  EXPECT_EQ(p.release().code(), ErrorCode::kNotOwner) << "the retry finds it gone";
  EXPECT_EQ(p.token().size, 0u);
}

TEST_F(PrimitiveEdges, ReentrantUnknownReleaseStopsClaiming) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(300));
  ReentrantLock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-unrel"), re_opts(10000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << c.last_error();
  proxy->set_delay(ms_s(400));
  EXPECT_FALSE(lock.release().ok());
  EXPECT_FALSE(lock.held()) << "still claims a lock the server may have deleted";
  EXPECT_EQ(lock.depth(), 0u);
  drain(*proxy);
  EXPECT_EQ(run(admin_, {"EXISTS", "re-unrel"}), "0");
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotOwner) << "the retry is sent and finds it gone";
  EXPECT_EQ(lock.release().code(), ErrorCode::kNotHeld);
}

// --- A lost acquire reply --------------------------------------------------

TEST_F(PrimitiveEdges, LostAcquireIsCleanedUpByRelease) {
  auto proxy = start_proxy(Nanos::zero());
  Connection c;
  open_via(c, *proxy, ms_s(300));
  // First level: granted on the server, reply lost.
  ReentrantLock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-lost"), re_opts(10000)).ok());
  proxy->set_delay(ms_s(400));
  EXPECT_FALSE(lock.try_acquire().ok());
  EXPECT_FALSE(lock.held());
  drain(*proxy);
  ASSERT_EQ(run(admin_, {"HGET", "re-lost", "depth"}), "1");
  EXPECT_TRUE(lock.release().ok()) << "release() must remove the level that landed";
  EXPECT_EQ(run(admin_, {"EXISTS", "re-lost"}), "0");
  // A re-entry that landed unseen: one release() still frees the lock.
  ASSERT_TRUE(lock.try_acquire().ok());
  proxy->set_delay(ms_s(400));
  EXPECT_FALSE(lock.try_acquire().ok());
  EXPECT_EQ(lock.depth(), 1u);
  drain(*proxy);
  ASSERT_EQ(run(admin_, {"HGET", "re-lost", "depth"}), "2");
  EXPECT_TRUE(lock.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "re-lost"}), "0") << "the unseen level outlived release()";
  // Semaphore: the permit keeps its id after the failed acquire.
  Semaphore sem(c);
  ASSERT_TRUE(sem.init(Bytes::from_cstr("sem-lost"), sem_opts(2, 10000)).ok());
  Permit p;
  proxy->set_delay(ms_s(400));
  EXPECT_FALSE(sem.acquire(&p, Nanos::zero()).ok());
  EXPECT_EQ(p.remaining(), Nanos::zero());
  drain(*proxy);
  ASSERT_EQ(run(admin_, {"ZCARD", "sem-lost"}), "1");
  EXPECT_TRUE(p.release().ok());
  EXPECT_EQ(run(admin_, {"ZCARD", "sem-lost"}), "0");
}

// --- A fence counter at its limit ------------------------------------------

TEST_F(PrimitiveEdges, ReentrantFenceCounterAtLimitWritesNothing) {
  ReentrantLock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("re-fence"), re_opts(5000)).ok());
  ASSERT_TRUE(lock.try_acquire().ok());
  ASSERT_TRUE(lock.release().ok());
  const std::string fence_key = run(admin_, {"KEYS", "*re-fence*"});
  ASSERT_NE(fence_key.find("fence"), std::string::npos) << fence_key;
  // Beyond 2^53 a Lua number cannot hold the next fence exactly: two
  // grants would share one. Refused, with nothing written.
  ASSERT_EQ(run(admin_, {"SET", fence_key, "9007199254740992"}), "OK");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(run(admin_, {"EXISTS", "re-fence"}), "0");
  EXPECT_EQ(run(admin_, {"GET", fence_key}), "9007199254740992");
  // A counter of the wrong type: the same.
  ASSERT_EQ(run(admin_, {"DEL", fence_key}), "1");
  ASSERT_EQ(run(admin_, {"HSET", fence_key, "x", "1"}), "1");
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kServerError);
  EXPECT_EQ(run(admin_, {"EXISTS", "re-fence"}), "0");
  // The connection stays usable.
  ASSERT_EQ(run(admin_, {"DEL", fence_key}), "1");
  EXPECT_TRUE(lock.try_acquire().ok()) << a_.last_error();
  EXPECT_TRUE(lock.release().ok());
}

// --- RateLimiter -----------------------------------------------------------

TEST_F(PrimitiveEdges, RateLimiterLimitOneLateAdmissionIsNotAllowed) {
  // The admission's reply comes after its window ended on the server (250
  // ms back > 200 ms): acting on it would overlap the next one's window.
  auto proxy = start_proxy(ms_s(250));
  Connection c;
  open_via(c, *proxy, ms_s(2000));
  RateLimiterOptions o;
  o.window = Millis(n_s(200));
  RateLimiter late(c), peer(b_);
  ASSERT_TRUE(late.init(Bytes::from_cstr("cd-late"), o).ok());
  ASSERT_TRUE(peer.init(Bytes::from_cstr("cd-late"), o).ok());
  Admission adm;
  const Status s = late.try_acquire(&adm);
  if (s.ok()) {
    EXPECT_EQ(peer.try_acquire().code(), ErrorCode::kBusy) << "two admissions within one window";
  }
  EXPECT_EQ(s.code(), ErrorCode::kExpired);
  EXPECT_FALSE(adm.allowed);
}

TEST_F(PrimitiveEdges, RateLimiterLateAdmissionIsNotAllowed) {
  // The admission's reply comes after its window ended: acting on it would
  // be a second action in the next window.
  auto proxy = start_proxy(ms_s(250));
  Connection c;
  open_via(c, *proxy, ms_s(2000));
  RateLimiterOptions o;
  o.limit = 1;
  o.window = Millis(n_s(200));
  RateLimiter late(c), peer(b_);
  ASSERT_TRUE(late.init(Bytes::from_cstr("q-late"), o).ok());
  ASSERT_TRUE(peer.init(Bytes::from_cstr("q-late"), o).ok());
  Admission adm;
  const Status s = late.try_acquire(&adm);
  if (s.ok()) {
    EXPECT_EQ(peer.try_acquire().code(), ErrorCode::kBusy)
        << "two admissions within one window of M = 1";
  }
  EXPECT_EQ(s.code(), ErrorCode::kExpired);
  EXPECT_FALSE(adm.allowed);
}

}  // namespace
}  // namespace edgelock
