// Semaphore with expiring permits against a real redis-server: the basics,
// server-clock expiry, a crashed holder, and 8 processes on 3 permits.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "../support/contention.h"
#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::run;

SemaphoreOptions opts(uint32_t permits, int64_t ttl_ms) {
  SemaphoreOptions o;
  o.permits = permits;
  o.ttl = Millis(ttl_ms);
  o.retry_min = Millis(1);
  o.retry_max = Millis(20);
  return o;
}

class SemaphoreTest : public test::SharedServerTest {
 protected:
};

TEST_F(SemaphoreTest, CountsReleasesAndExtends) {
  Semaphore sa(a_), sb(b_);
  ASSERT_TRUE(sa.init(Bytes::from_cstr("fw-download"), opts(2, 5000)).ok());
  ASSERT_TRUE(sb.init(Bytes::from_cstr("fw-download"), opts(2, 5000)).ok());
  Permit p1, p2, p3;
  ASSERT_TRUE(sa.try_acquire(&p1).ok()) << a_.last_error();
  ASSERT_TRUE(sb.try_acquire(&p2).ok());
  EXPECT_EQ(p1.token().size, 32u);
  EXPECT_FALSE(p1.token().equals(p2.token()));
  EXPECT_GT(p1.remaining(), Millis(4800));
  EXPECT_EQ(sa.try_acquire(&p3).code(), ErrorCode::kBusy);
  EXPECT_GT(sa.busy_ttl(), Millis(4000));
  EXPECT_LE(sa.busy_ttl(), Millis(5000));
  EXPECT_EQ(p3.remaining(), Nanos::zero());
  Result<uint32_t> used = sa.in_use();
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(used.value(), 2u);
  // Release by id from the other handle (as another process would).
  ASSERT_TRUE(sb.release_id(p1.token()).ok());
  EXPECT_EQ(p1.release().code(), ErrorCode::kNotOwner) << "already gone";
  EXPECT_EQ(p1.release().code(), ErrorCode::kNotHeld) << "handle forgot it";
  ASSERT_TRUE(sa.acquire(&p3, Millis(1000)).ok());
  // Extend resets the lease on the server's clock.
  ASSERT_TRUE(p2.extend(Millis(20000)).ok());
  EXPECT_GT(p2.remaining(), Millis(19000));
  Lease& lease = p2;  // what a lease keeper renews
  ASSERT_TRUE(lease.renew().ok());
  EXPECT_LE(lease.remaining(), Millis(5000));
  EXPECT_GT(lease.remaining(), Millis(4800));
  ASSERT_TRUE(p2.release().ok());
  EXPECT_EQ(p2.extend(Millis(1000)).code(), ErrorCode::kNotHeld);
  Permit gone = p3;
  ASSERT_TRUE(p3.release().ok());
  EXPECT_EQ(gone.extend(Millis(1000)).code(), ErrorCode::kNotOwner) << "released permits stay gone";
  used = sa.in_use();
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(used.value(), 0u);
}

TEST_F(SemaphoreTest, ExpiryComesFromTheServerClock) {
  Semaphore s(a_);
  ASSERT_TRUE(s.init(Bytes::from_cstr("sem-time"), opts(1, 3000)).ok());
  const std::string before = run(admin_, {"TIME"});
  Permit p;
  ASSERT_TRUE(s.try_acquire(&p).ok());
  const std::string after = run(admin_, {"TIME"});
  auto ms = [](const std::string& t) {
    const size_t sp = t.find(' ');
    return std::stoll(t.substr(0, sp)) * 1000 + std::stoll(t.substr(sp + 1)) / 1000;
  };
  const long long score = std::stoll(
      run(admin_, {"ZSCORE", "sem-time",
                   std::string(reinterpret_cast<const char*>(p.token().data), p.token().size)}));
  EXPECT_GE(score, ms(before) + 3000);
  EXPECT_LE(score, ms(after) + 3000);
  const int pttl = std::stoi(run(admin_, {"PTTL", "sem-time"}));
  EXPECT_GT(pttl, 2500) << "the key expires with its last permit";
  EXPECT_LE(pttl, 3001);
  ASSERT_TRUE(p.release().ok());
}

TEST_F(SemaphoreTest, ShortLeaseExpiresAndExtendKeepsIt) {
  const int64_t k = test::slowdown();  // stretch real TTLs under qemu
  Semaphore s(a_), other(b_);
  ASSERT_TRUE(s.init(Bytes::from_cstr("sem-ttl"), opts(1, 200 * k)).ok());
  ASSERT_TRUE(other.init(Bytes::from_cstr("sem-ttl"), opts(1, 200 * k)).ok());
  Permit kept, expired, mine;
  ASSERT_TRUE(s.try_acquire(&kept).ok());
  ASSERT_TRUE(kept.extend(Millis(2000 * k)).ok());
  SystemClock().sleep_for(Millis(300 * k));
  EXPECT_EQ(other.try_acquire(&mine).code(), ErrorCode::kBusy) << "extended past its first TTL";
  ASSERT_TRUE(kept.release().ok());
  ASSERT_TRUE(s.try_acquire(&expired).ok());
  SystemClock().sleep_for(Millis(300 * k));
  EXPECT_EQ(expired.remaining(), Nanos::zero());
  ASSERT_TRUE(other.try_acquire(&mine).ok()) << "expired permit came back";
  EXPECT_EQ(expired.extend(Millis(1000)).code(), ErrorCode::kNotOwner);
  ASSERT_TRUE(mine.release().ok());
}

TEST_F(SemaphoreTest, CrashedHolderPermitReturnsAfterTtl) {
  const int64_t ttl = 400 * test::slowdown();
  const pid_t pid = fork();
  if (pid == 0) {
    // The "device": takes the only permit and dies without releasing.
    Connection c;
    if (!c.init(server_->url().c_str()).ok()) _exit(10);
    Semaphore s(c);
    Permit p;
    if (!s.init(Bytes::from_cstr("modem-slots"), opts(1, ttl)).ok()) _exit(11);
    _exit(s.try_acquire(&p).ok() ? 0 : 12);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Semaphore s(a_);
  ASSERT_TRUE(s.init(Bytes::from_cstr("modem-slots"), opts(1, 5000)).ok());
  Permit p;
  EXPECT_EQ(s.try_acquire(&p).code(), ErrorCode::kBusy);
  EXPECT_GT(s.busy_ttl(), Millis(0));
  EXPECT_LE(s.busy_ttl(), Millis(ttl));
  SystemClock clock;
  const TimePoint t0 = clock.now();
  ASSERT_TRUE(s.acquire(&p, Millis(5000) * test::slowdown()).ok());
  const Nanos waited = clock.now() - t0;
  EXPECT_GT(waited, Millis(ttl / 2)) << "not before the crashed holder's TTL";
  EXPECT_LT(waited, Millis(ttl + 1000 * test::slowdown())) << "but soon after it";
  ASSERT_TRUE(p.release().ok());
}

// --- 8 processes, 3 permits ---------------------------------------------

constexpr int kWorkers = 8;
constexpr uint32_t kPermits = 3;
constexpr int kCyclesEach = 40;

struct Shared {
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> over_limit{0};
  std::atomic<int> grants{0};
  std::atomic<int> abandoned{0};
  std::atomic<int> errors{0};
};

bool enter(Shared* sh) {
  const int n = sh->inside.fetch_add(1) + 1;
  int m = sh->max_inside.load();
  while (n > m && !sh->max_inside.compare_exchange_weak(m, n)) {
  }
  if (n > static_cast<int>(kPermits)) sh->over_limit.fetch_add(1);
  return n <= static_cast<int>(kPermits);
}

int worker(int w, const std::string& url, Shared* sh) {
  Connection conn;
  ConnectionOptions o;
  o.command_timeout = Millis(2000) * test::slowdown();
  if (!conn.init(url.c_str(), o).ok()) return 10;
  Semaphore sem(conn), short_sem(conn);
  if (!sem.init(Bytes::from_cstr("fw-slots"), opts(kPermits, 5000 * test::slowdown())).ok())
    return 11;
  // Worker 7 sometimes walks away from a short permit: it must come back.
  if (!short_sem.init(Bytes::from_cstr("fw-slots"), opts(kPermits, 100 * test::slowdown())).ok())
    return 11;
  for (int i = 0; i < kCyclesEach; ++i) {
    const bool abandon = w == 7 && i % 8 == 0;
    Semaphore& s = abandon ? short_sem : sem;
    Permit p;
    if (!s.acquire(&p, Millis(30000) * test::slowdown()).ok()) {
      sh->errors.fetch_add(1);
      return 12;
    }
    if (p.remaining() <= Nanos::zero()) continue;  // too late to use (not expected)
    sh->grants.fetch_add(1);
    enter(sh);
    SystemClock().sleep_for(Millis(1));
    sh->inside.fetch_sub(1);  // leave before the permit can expire
    if (abandon) {
      sh->abandoned.fetch_add(1);
      continue;
    }
    if (!p.release().ok()) sh->errors.fetch_add(1);
  }
  return 0;
}

TEST(SemaphoreProcesses, EightProcessesNeverExceedThreePermits) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  Shared* sh = new (mem) Shared();
  test::run_processes(kWorkers, [&](int w) { return worker(w, server.url(), sh); });
  EXPECT_EQ(sh->grants.load(), kWorkers * kCyclesEach);
  EXPECT_EQ(sh->over_limit.load(), 0);
  EXPECT_LE(sh->max_inside.load(), static_cast<int>(kPermits));
  EXPECT_GE(sh->max_inside.load(), 2) << "the workers really contended";
  EXPECT_EQ(sh->abandoned.load(), kCyclesEach / 8);
  EXPECT_EQ(sh->errors.load(), 0);
  std::printf("semaphore: %d grants, max %d holders of %u permits, %d abandoned permits\n",
              sh->grants.load(), sh->max_inside.load(), kPermits, sh->abandoned.load());
  munmap(mem, sizeof(Shared));
}

}  // namespace
}  // namespace edgelock
