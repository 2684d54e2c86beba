// FairLock against a real redis-server: grants in queue order, no barging
// by the releaser, dead or stopped waiters drop out after waiter_timeout,
// the wait bound under contention, try_acquire never queues, a give-up
// leaves the queue, the keeper, and the SCRIPT LOAD path for long keys.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/detail/key_slot.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

Nanos slow(Nanos t) { return t * test::slowdown(); }
int64_t slow_ms(int64_t ms) { return ms * test::slowdown(); }
TimePoint now() { return default_clock().now(); }
void sleep_for(Nanos t) { std::this_thread::sleep_for(std::chrono::nanoseconds(t)); }

// The default waiter timeout scales with the slowdown: a place must not
// lapse between two attempts of a waiter under qemu.
FairLockOptions fair(int64_t ttl_ms, int64_t waiter_timeout_ms = 0) {
  FairLockOptions o;
  o.ttl = Millis(ttl_ms);
  o.waiter_timeout = Millis(waiter_timeout_ms != 0 ? waiter_timeout_ms : slow_ms(2000));
  return o;
}

// Waiters queued in `queue` now (fields "w:<token>" of the queue hash).
int waiters(Connection& admin, const std::string& queue) {
  const std::string fields = run(admin, {"HKEYS", queue});
  int n = 0;
  for (size_t i = 0; (i = fields.find("w:", i)) != std::string::npos; i += 2) ++n;
  return n;
}

// One contender: its own connection and lock (a thread or a process).
struct Contender {
  Connection conn;
  FairLock lock{conn};
  bool open(const std::string& url, const char* key, const FairLockOptions& o) {
    return test::open(conn, url) && lock.init(Bytes::from_cstr(key), o).ok();
  }
};

class FairLockTest : public test::SharedServerTest {
 protected:
  // Waiters queued on `key` now.
  int queued(const char* key) { return waiters(admin_, std::string("{") + key + "}:queue"); }
  // Polls (bounded) until `n` waiters are queued on `key`.
  bool wait_queued(const char* key, int n) {
    const TimePoint end = now() + slow(Millis(5000));
    for (int i = 0; i < 5000 && now() < end; ++i) {
      if (queued(key) == n) return true;
      sleep_for(Millis(1));
    }
    return false;
  }
};

TEST_F(FairLockTest, GrantReleaseExtendAndSharedFence) {
  FairLock f(a_);
  Lock plain(b_);
  ASSERT_TRUE(f.init(Bytes::from_cstr("fl"), fair(10000)).ok());
  ASSERT_TRUE(plain.init(Bytes::from_cstr("fl")).ok());
  ASSERT_TRUE(f.try_acquire().ok()) << a_.last_error();
  EXPECT_TRUE(f.held());
  EXPECT_EQ(f.fence(), 1u);
  EXPECT_EQ(plain.try_acquire().code(), ErrorCode::kBusy) << "a plain Lock is excluded too";
  ASSERT_TRUE(f.extend(Millis(20000), ExtendMode::kReplace).ok());
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", "fl"})), 15000);
  const Result<bool> mine = f.owned();
  ASSERT_TRUE(mine.ok());
  EXPECT_TRUE(mine.value());
  ASSERT_TRUE(f.release().ok());
  EXPECT_FALSE(f.held());
  EXPECT_EQ(f.release().code(), ErrorCode::kNotHeld);
  ASSERT_TRUE(plain.try_acquire().ok());
  EXPECT_EQ(plain.fence(), 2u) << "one fence counter for both kinds";
  ASSERT_TRUE(plain.release().ok());
  ASSERT_TRUE(f.acquire(Millis(1000)).ok());
  EXPECT_EQ(f.fence(), 3u);
  ASSERT_TRUE(f.release().ok());
  EXPECT_EQ(run(admin_, {"EXISTS", "{fl}:queue"}), "0") << "no queue left behind";
}

TEST_F(FairLockTest, InitChecksOptions) {
  FairLock f(a_);
  EXPECT_EQ(f.init(Bytes::from_cstr("opt"), fair(10000, 499)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.init(Bytes(), fair(10000)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.init(Bytes::from_cstr("opt"), fair(0)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(f.try_acquire().code(), ErrorCode::kInvalidArgument) << "not init()ed";
  EXPECT_TRUE(f.init(Bytes::from_cstr("opt"), fair(10000, 500)).ok());
  ASSERT_TRUE(f.try_acquire().ok());
  EXPECT_EQ(f.acquire(Millis(10)).code(), ErrorCode::kInvalidArgument) << "already holding";
  ASSERT_TRUE(f.release().ok());
}

// try_acquire never joins the queue: a caller that does not wait must not
// hold others up.
TEST_F(FairLockTest, TryNeverQueues) {
  FairLock holder(a_), other(b_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("try"), fair(10000)).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("try"), fair(10000)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  EXPECT_EQ(other.try_acquire().code(), ErrorCode::kBusy);
  EXPECT_EQ(other.acquire(Nanos::zero()).code(), ErrorCode::kBusy);
  EXPECT_GT(other.busy_ttl(), Millis(9000));
  EXPECT_EQ(other.queue_position(), 0u);
  EXPECT_EQ(queued("try"), 0);
  ASSERT_TRUE(holder.release().ok());
  EXPECT_TRUE(other.try_acquire().ok());
  ASSERT_TRUE(other.release().ok());
}

// A wait that ends leaves the queue at once (not after waiter_timeout).
TEST_F(FairLockTest, GiveUpLeavesTheQueue) {
  FairLock holder(a_), waiter(b_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("quit"), fair(10000)).ok());
  ASSERT_TRUE(waiter.init(Bytes::from_cstr("quit"), fair(10000, 60000)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  EXPECT_EQ(waiter.acquire(Millis(150)).code(), ErrorCode::kBusy);
  EXPECT_EQ(waiter.queue_position(), 0u);
  EXPECT_EQ(queued("quit"), 0);
  ASSERT_TRUE(holder.release().ok());
}

// A wait in slices (GiveUp::kStay) keeps its place between them; leave()
// gives it up; release() after a failed acquire leaves the queue too.
TEST_F(FairLockTest, KeptPlaceSurvivesSlices) {
  Contender later;
  ASSERT_TRUE(later.open(server_->url(), "slices", fair(10000)));
  FairLock holder(a_), sliced(b_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("slices"), fair(10000)).ok());
  ASSERT_TRUE(sliced.init(Bytes::from_cstr("slices"), fair(10000)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  EXPECT_EQ(sliced.acquire(Millis(50), GiveUp::kStay).code(), ErrorCode::kBusy);
  EXPECT_TRUE(sliced.queued());
  EXPECT_EQ(sliced.queue_position(), 1u);
  std::atomic<uint64_t> later_fence{0};
  std::thread t([&] {
    if (later.lock.acquire(slow(Millis(5000))).ok()) {
      later_fence = later.lock.fence();
      later.lock.release().ignore();
    }
  });
  ASSERT_TRUE(wait_queued("slices", 2));
  EXPECT_EQ(sliced.acquire(Millis(50), GiveUp::kStay).code(), ErrorCode::kBusy);
  EXPECT_EQ(sliced.queue_position(), 1u) << "the second slice went on from the kept place";
  std::thread release_soon([&] {
    sleep_for(Millis(50));
    holder.release().ignore();
  });
  ASSERT_TRUE(sliced.acquire(slow(Millis(5000)), GiveUp::kStay).ok());
  release_soon.join();
  EXPECT_FALSE(sliced.queued());
  const uint64_t mine = sliced.fence();
  ASSERT_TRUE(sliced.release().ok());
  t.join();
  EXPECT_GT(later_fence.load(), mine) << "the kept place went first";

  ASSERT_TRUE(holder.try_acquire().ok());
  EXPECT_EQ(sliced.acquire(Millis(20), GiveUp::kStay).code(), ErrorCode::kBusy);
  EXPECT_EQ(queued("slices"), 1);
  EXPECT_TRUE(sliced.leave().ok());
  EXPECT_FALSE(sliced.queued());
  EXPECT_EQ(queued("slices"), 0);
  EXPECT_EQ(sliced.leave().code(), ErrorCode::kNotHeld);
  EXPECT_EQ(sliced.acquire(Millis(20), GiveUp::kStay).code(), ErrorCode::kBusy);
  EXPECT_EQ(sliced.release().code(), ErrorCode::kNotOwner);
  EXPECT_EQ(queued("slices"), 0) << "release() gave the place up";
  ASSERT_TRUE(holder.release().ok());
}

// K waiters join one by one; each is granted in the order it joined.
TEST_F(FairLockTest, GrantsInQueueOrder) {
  constexpr int kWaiters = 6;
  FairLock holder(a_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("fifo"), fair(10000)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  std::unique_ptr<Contender> c[kWaiters];
  std::atomic<int> next{0};
  int order[kWaiters];
  std::thread threads[kWaiters];
  for (int i = 0; i < kWaiters; ++i) {
    c[i].reset(new Contender);
    ASSERT_TRUE(c[i]->open(server_->url(), "fifo", fair(10000)));
    threads[i] = std::thread([&, i] {
      order[i] = -1;
      if (!c[i]->lock.acquire(slow(Millis(10000))).ok()) return;
      order[i] = next.fetch_add(1);
      sleep_for(Millis(5));
      c[i]->lock.release().ignore();
    });
    ASSERT_TRUE(wait_queued("fifo", i + 1)) << "waiter " << i << " never queued";
  }
  ASSERT_TRUE(holder.release().ok());
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(order[i], i) << "waiter " << i;
}

// The releaser cannot barge: with a waiter queued, a release followed at
// once by another attempt finds the waiter's turn (even before it woke).
TEST_F(FairLockTest, ReleaserCannotBarge) {
  Contender w;
  ASSERT_TRUE(w.open(server_->url(), "barge", fair(10000)));
  FairLock holder(a_);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("barge"), fair(10000)).ok());
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(holder.try_acquire().ok());
    std::atomic<uint64_t> waiter_fence{0};
    std::thread t([&] {
      if (w.lock.acquire(slow(Millis(5000))).ok()) {
        waiter_fence = w.lock.fence();
        sleep_for(Millis(20));
        w.lock.release().ignore();
      }
    });
    ASSERT_TRUE(wait_queued("barge", 1));
    ASSERT_TRUE(holder.release().ok());
    EXPECT_EQ(holder.try_acquire().code(), ErrorCode::kBusy) << "round " << round;
    ASSERT_TRUE(holder.acquire(slow(Millis(5000))).ok());
    t.join();
    EXPECT_GT(waiter_fence.load(), 0u);
    EXPECT_GT(holder.fence(), waiter_fence.load()) << "the waiter went first";
    ASSERT_TRUE(holder.release().ok());
  }
}

// A waiter process that dies (SIGKILL) while queued at the head drops out
// after waiter_timeout; the next waiter is granted then. One that is
// stopped (SIGSTOP) with its attempt in flight behind a BLPOP may still be
// granted by the server when the BLPOP returns: then, as for a holder that
// stops, the lock frees at the child's TTL.
void dead_head_case(const std::string& url, Connection& admin, int sig) {
  const int64_t kWaiterTimeoutMs = slow_ms(600);
  const int64_t kChildTtlMs = slow_ms(800);
  FairLock holder(admin);
  ASSERT_TRUE(holder.init(Bytes::from_cstr("dead"), fair(10000, kWaiterTimeoutMs)).ok());
  ASSERT_TRUE(holder.try_acquire().ok());
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    Contender c;
    if (!c.open(url, "dead", fair(kChildTtlMs, kWaiterTimeoutMs))) _exit(2);
    _exit(c.lock.acquire(Millis(60000)).ok() ? 0 : 1);
  }
  ASSERT_GT(child, 0);
  Contender next;
  ASSERT_TRUE(next.open(url, "dead", fair(10000, kWaiterTimeoutMs)));
  // The child joins first: wait for its entry, then stop or kill it.
  bool joined = false;
  for (int i = 0; i < 5000 && !joined; ++i) {
    joined = waiters(admin, "{dead}:queue") == 1;
    if (!joined) sleep_for(Millis(1));
  }
  ASSERT_TRUE(joined);
  kill(child, sig);
  const TimePoint stopped = now();
  std::atomic<int64_t> granted_ms{-1};
  std::thread t([&] {
    if (next.lock.acquire(slow(Millis(10000))).ok()) {
      granted_ms = test::ms(now() - stopped);
      next.lock.release().ignore();
    }
  });
  sleep_for(Millis(50));
  ASSERT_TRUE(holder.release().ok());
  t.join();
  if (sig != SIGKILL) kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_GE(granted_ms.load(), 0) << "never granted: the dead waiter blocked the queue";
  const int64_t bound = kWaiterTimeoutMs + (sig == SIGKILL ? 0 : kChildTtlMs) + slow_ms(400);
  EXPECT_LE(granted_ms.load(), bound);
  EXPECT_GE(granted_ms.load(), kWaiterTimeoutMs / 4) << "the dead head was skipped at once";
}

TEST_F(FairLockTest, CrashedWaiterDropsOut) { dead_head_case(server_->url(), admin_, SIGKILL); }
TEST_F(FairLockTest, StoppedWaiterDropsOut) { dead_head_case(server_->url(), admin_, SIGSTOP); }

// K threads contend with hold H: every wait stays within
// (K - 1) x (H + handoff) + waiter_timeout, and every thread gets turns.
TEST_F(FairLockTest, WaitBoundUnderContention) {
  constexpr int kThreads = 6;
  const Nanos hold = Millis(10);
  const Nanos handoff = slow(Millis(10));  // generous for a shared machine
  const Millis waiter_timeout(slow_ms(2000));
  const Nanos run_for = slow(Millis(2000));
  std::unique_ptr<Contender> c[kThreads];
  std::atomic<int64_t> max_wait_us{0};
  std::atomic<int> grants[kThreads];
  std::atomic<int> failures{0};
  std::thread threads[kThreads];
  const TimePoint end = now() + run_for;
  for (int i = 0; i < kThreads; ++i) {
    c[i].reset(new Contender);
    grants[i] = 0;
    ASSERT_TRUE(c[i]->open(server_->url(), "bound", fair(10000, waiter_timeout.count())));
  }
  for (int i = 0; i < kThreads; ++i) {
    threads[i] = std::thread([&, i] {
      for (int n = 0; n < 100000 && now() < end; ++n) {
        const TimePoint t0 = now();
        if (!c[i]->lock.acquire(slow(Millis(10000))).ok()) {
          failures.fetch_add(1);
          return;
        }
        const int64_t waited =
            std::chrono::duration_cast<std::chrono::microseconds>(now() - t0).count();
        int64_t seen = max_wait_us.load();
        while (waited > seen && !max_wait_us.compare_exchange_weak(seen, waited)) {
        }
        grants[i].fetch_add(1);
        sleep_for(hold);
        if (!c[i]->lock.release().ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  const Nanos bound = (kThreads - 1) * (hold + handoff) + waiter_timeout;
  EXPECT_LE(std::chrono::microseconds(max_wait_us.load()), bound);
  int least = 1 << 30, most = 0;
  for (auto& g : grants) {
    least = std::min(least, g.load());
    most = std::max(most, g.load());
  }
  EXPECT_GT(least, 0);
  EXPECT_LE(most, least + 2) << "FIFO turns: every thread gets about as many grants";
}

// The keeper renews a FairLock like any lease.
TEST_F(FairLockTest, KeeperRenews) {
  FairLock f(a_);
  // The TTL scales with the command timeout: a lease too short to renew
  // within it is refused.
  ASSERT_TRUE(f.init(Bytes::from_cstr("kept"), fair(slow_ms(3000))).ok());
  ASSERT_TRUE(f.try_acquire().ok());
  LeaseKeeper keeper(f);
  ASSERT_TRUE(keeper.start().ok());
  // Shorten the server's TTL behind the keeper's back (still past its first
  // renewal, about TTL/6 from now): only a real renewal lengthens it again.
  ASSERT_EQ(run(admin_, {"PEXPIRE", "kept", std::to_string(slow_ms(1500))}), "1");
  const TimePoint give_up = now() + slow(Millis(2000));
  for (int i = 0; i < 200 * test::slowdown() && keeper.stats().renewals == 0 && now() < give_up;
       ++i) {
    sleep_for(Millis(10));
    ASSERT_NE(keeper.step(), LeaseState::kLost);
  }
  EXPECT_GT(keeper.stats().renewals, 0u);
  EXPECT_GT(std::stoll(run(admin_, {"PTTL", "kept"})), slow_ms(2000));
  keeper.stop();
  LockGuard guard(f);
}

// A key at max_key_len: the scripts' EVAL by body cannot fit the command
// buffer, so after SCRIPT FLUSH the lock loads them (SCRIPT LOAD) and
// goes on.
TEST_F(FairLockTest, LongKeySurvivesScriptFlush) {
  const std::string key(kMaxKeyLen, 'k');
  FairLock f(a_);
  ASSERT_TRUE(f.init(Bytes(key.data(), key.size()), fair(10000)).ok());
  ASSERT_TRUE(f.try_acquire().ok()) << a_.last_error();
  ASSERT_EQ(run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  ASSERT_TRUE(f.release().ok()) << a_.last_error();
  ASSERT_EQ(run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  ASSERT_TRUE(f.acquire(Millis(1000)).ok()) << a_.last_error();
  ASSERT_TRUE(f.release().ok());
}

// The queue and turn keys are the documented names, in the key's slot.
TEST_F(FairLockTest, CompanionKeysShareTheSlot) {
  struct Case {
    const char* key;
    const char* queue;
    const char* wake;  // the first waiter's wake list
  };
  for (const Case& k : {Case{"modem", "{modem}:queue", "{modem}:w:1"},
                        Case{"{modem}", "queue:{modem}", "w:1:{modem}"},
                        Case{"site{7}:pump", "site{7}:pump:queue", "site{7}:pump:w:1"}}) {
    FairLock holder(a_), waiter(b_);
    ASSERT_TRUE(holder.init(Bytes::from_cstr(k.key), fair(10000)).ok());
    ASSERT_TRUE(waiter.init(Bytes::from_cstr(k.key), fair(10000, 60000)).ok());
    ASSERT_TRUE(holder.try_acquire().ok());
    EXPECT_EQ(waiter.acquire(Millis(30)).code(), ErrorCode::kBusy);
    // A waiter queued meanwhile: the queue key exists under its name.
    std::thread t([&] { waiter.acquire(slow(Millis(300))).ignore(); });
    sleep_for(slow(Millis(100)));
    EXPECT_EQ(run(admin_, {"EXISTS", k.queue}), "1") << k.key;
    ASSERT_TRUE(holder.release().ok());
    t.join();
    ASSERT_TRUE(waiter.release().ok());
    EXPECT_EQ(key_slot(Bytes::from_cstr(k.key)), key_slot(Bytes::from_cstr(k.queue))) << k.key;
    EXPECT_EQ(key_slot(Bytes::from_cstr(k.key)), key_slot(Bytes::from_cstr(k.wake))) << k.key;
  }
}

}  // namespace
}  // namespace edgelock
