// Mutual exclusion across processes: 4 workers x 500 grants on one key,
// checked by an overlap detector and a fencing-token-checking resource.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "../support/contention.h"
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
  if (!conn.init(url.c_str(), o).ok()) return test::kWorkerSetupFailed;
  Lock lock(conn);
  LockOptions lo;
  lo.ttl = Millis(5000 * test::slowdown());
  lo.retry_min = Millis(1);
  lo.retry_max = Millis(20);
  if (!lock.init(Bytes::from_cstr("shared-device"), lo).ok()) return test::kWorkerInitFailed;
  return test::contend(lock, kGrantsEach, dev);
}

TEST(MutualExclusion, FourProcessesFiveHundredGrantsEach) {
  test::RedisServer server;
  ASSERT_TRUE(server.start());
  test::FencedResource* dev = test::FencedResource::create();
  ASSERT_NE(dev, nullptr);
  test::run_processes(kWorkers, [&](int) { return worker(server.url(), dev); });
  test::expect_exclusive(*dev, kWorkers * kGrantsEach);
  EXPECT_EQ(dev->max_fence.load(), static_cast<uint64_t>(kWorkers * kGrantsEach));
  std::printf("mutex: %d grants, %d overlaps, max fence %llu\n", dev->grants.load(),
              dev->overlaps.load(), static_cast<unsigned long long>(dev->max_fence.load()));
}

}  // namespace
}  // namespace edgelock
