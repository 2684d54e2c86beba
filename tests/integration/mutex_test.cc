// Mutual exclusion across processes: 4 workers x 500 grants on one key,
// checked by an overlap detector and a fencing-token-checking resource.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../support/fenced_resource.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

constexpr int kWorkers = 4;
constexpr int kGrantsEach = 500;

int worker(const std::string& url, test::FencedResource* dev) {
  Connection conn;
  ConnectionOptions o;
  o.command_timeout = Millis(2000) * test::slowdown();
  if (!conn.setup(url.c_str(), o).ok()) return 10;
  Lock lock(conn);
  LockOptions lo;
  lo.ttl = Millis(5000 * test::slowdown());
  lo.retry_min = Millis(1);
  lo.retry_max = Millis(20);
  if (!lock.init(Bytes::from_cstr("shared-device"), lo).ok()) return 11;
  for (int i = 0; i < kGrantsEach; ++i) {
    const Status s = lock.acquire(Millis(30000) * test::slowdown());
    if (!s.ok()) {
      dev->errors.fetch_add(1);
      return 12;
    }
    dev->grants.fetch_add(1);
    const bool alone = dev->enter();
    if (!dev->write(lock.fence())) dev->errors.fetch_add(1);
    if (i % 16 == 0) SystemClock().sleep_for(Millis(1));  // hold a little, sometimes
    if (alone) dev->leave();
    if (!lock.release().ok()) dev->errors.fetch_add(1);
  }
  return 0;
}

TEST(MutualExclusion, FourProcessesFiveHundredGrantsEach) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  test::FencedResource* dev = test::FencedResource::create();
  ASSERT_NE(dev, nullptr);
  pid_t pids[kWorkers];
  for (int w = 0; w < kWorkers; ++w) {
    pids[w] = fork();
    if (pids[w] == 0) _exit(worker(server.url(), dev));
    ASSERT_GT(pids[w], 0);
  }
  for (int w = 0; w < kWorkers; ++w) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[w], &status, 0), pids[w]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << w << " status " << status;
  }
  EXPECT_EQ(dev->grants.load(), kWorkers * kGrantsEach);
  EXPECT_EQ(dev->overlaps.load(), 0);
  EXPECT_EQ(dev->stale_rejected.load(), 0) << "fences strictly increase in grant order";
  EXPECT_EQ(dev->errors.load(), 0);
  EXPECT_EQ(dev->max_fence.load(), static_cast<uint64_t>(kWorkers * kGrantsEach));
  std::printf("mutex: %d grants, %d overlaps, max fence %llu\n", dev->grants.load(),
              dev->overlaps.load(), static_cast<unsigned long long>(dev->max_fence.load()));
}

}  // namespace
}  // namespace edgelock
