// Mutual exclusion over a quorum: 4 processes x 300 grants on one key over
// 3 servers, checked by an overlap detector and a resource that accepts
// only strictly increasing fencing tokens.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "../support/fenced_resource.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

constexpr int kWorkers = 4;
constexpr int kGrantsEach = 300;
constexpr size_t kServers = 3;

int worker(const std::string* urls, test::FencedResource* dev) {
  Connection conns[kServers];
  Connection* ptrs[kServers];
  ConnectionOptions o;
  o.command_timeout = Millis(2000) * test::slowdown();
  for (size_t i = 0; i < kServers; ++i) {
    if (!conns[i].setup(urls[i].c_str(), o).ok()) return 10;
    ptrs[i] = &conns[i];
  }
  QuorumLock lock;
  QuorumOptions qo;
  qo.ttl = Millis(5000 * test::slowdown());
  qo.server_timeout = Millis(200) * test::slowdown();
  qo.retry_min = Millis(1);
  qo.retry_max = Millis(20);
  if (!lock.init(ptrs, kServers, Bytes::from_cstr("shared-device"), qo).ok()) return 11;
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

TEST(QuorumMutualExclusion, FourProcessesThreeHundredGrantsEach) {
  std::unique_ptr<test::RedisServer> servers[kServers];
  std::string urls[kServers];
  for (size_t i = 0; i < kServers; ++i) {
    servers[i].reset(new test::RedisServer());
    ASSERT_TRUE(servers[i]->start());
    urls[i] = servers[i]->url();
  }
  test::FencedResource* dev = test::FencedResource::create();
  ASSERT_NE(dev, nullptr);
  const TimePoint t0 = default_clock().now();
  pid_t pids[kWorkers];
  for (int w = 0; w < kWorkers; ++w) {
    pids[w] = fork();
    if (pids[w] == 0) _exit(worker(urls, dev));
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
  EXPECT_GE(dev->max_fence.load(), static_cast<uint64_t>(kWorkers * kGrantsEach));
  std::printf("quorum mutex: %d grants over %zu servers in %lld ms, %d overlaps, max fence %llu\n",
              dev->grants.load(), kServers,
              static_cast<long long>(test::ms(default_clock().now() - t0)), dev->overlaps.load(),
              static_cast<unsigned long long>(dev->max_fence.load()));
}

}  // namespace
}  // namespace edgelock
