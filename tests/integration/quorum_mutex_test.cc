// Mutual exclusion over a quorum: 4 processes x 300 grants on one key over
// 3 servers, checked by an overlap detector and a resource that accepts
// only strictly increasing fencing tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "../support/contention.h"
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
    if (!conns[i].init(urls[i].c_str(), o).ok()) return test::kWorkerSetupFailed;
    ptrs[i] = &conns[i];
  }
  QuorumLock lock;
  QuorumOptions qo;
  qo.ttl = Millis(5000 * test::slowdown());
  qo.server_timeout = Millis(200) * test::slowdown();
  qo.retry_min = Millis(1);
  qo.retry_max = Millis(20);
  if (!lock.init(ptrs, kServers, Bytes::from_cstr("shared-device"), qo).ok()) {
    return test::kWorkerInitFailed;
  }
  return test::contend(lock, kGrantsEach, dev);
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
  test::run_processes(kWorkers, [&](int) { return worker(urls, dev); });
  test::expect_exclusive(*dev, kWorkers * kGrantsEach);
  EXPECT_GE(dev->max_fence.load(), static_cast<uint64_t>(kWorkers * kGrantsEach));
  std::printf("quorum mutex: %d grants over %zu servers in %lld ms, %d overlaps, max fence %llu\n",
              dev->grants.load(), kServers,
              static_cast<long long>(test::ms(default_clock().now() - t0)), dev->overlaps.load(),
              static_cast<unsigned long long>(dev->max_fence.load()));
}

}  // namespace
}  // namespace edgelock
