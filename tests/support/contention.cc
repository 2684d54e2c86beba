#include "contention.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace edgelock {
namespace test {

constexpr int kMaxWorkers = 64;

void run_processes(int workers, const std::function<int(int)>& work) {
  ASSERT_LE(workers, kMaxWorkers);
  pid_t pids[kMaxWorkers];
  int started = 0;
  for (; started < workers; ++started) {
    pids[started] = fork();
    if (pids[started] == 0) _exit(work(started));
    if (pids[started] < 0) break;
  }
  // Every started worker is waited for, even when a later fork failed.
  for (int w = 0; w < started; ++w) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[w], &status, 0), pids[w]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << w << " status " << status;
  }
  EXPECT_EQ(started, workers) << "fork failed";
}

void expect_exclusive(const FencedResource& dev, int grants) {
  EXPECT_EQ(dev.grants.load(), grants);
  EXPECT_EQ(dev.overlaps.load(), 0);
  EXPECT_EQ(dev.stale_rejected.load(), 0) << "fences strictly increase in grant order";
  EXPECT_EQ(dev.errors.load(), 0);
}

}  // namespace test
}  // namespace edgelock
