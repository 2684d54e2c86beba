#pragma once
// A keeper renewing one lease while another handle's acquire waits, both
// on one back end, driven from one poll() loop: what a firmware loop does
// with a lease it keeps and a second resource it waits for.

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>

#include "edgelock/lease.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"
#include "redis_server.h"

namespace edgelock {
namespace test {

struct KeeperBeside {
  Status waiter = ErrorCode::kInProgress;  // the waiter's last step()
  Nanos longest{0};                        // longest service() + step()
  bool kept = true;                        // service() never said kLost
};

/// Runs `keeper` and `waiter` (whose start_*() returned `started`) for
/// `span`, polling both; the waiter is stepped until it ends.
inline KeeperBeside keep_beside(LeaseKeeper& keeper, Lease& waiter, Status started, Nanos span) {
  using Steady = std::chrono::steady_clock;
  KeeperBeside r;
  r.waiter = started;
  const Steady::time_point end = Steady::now() + span;
  for (int i = 0; i < 200000 && Steady::now() < end && r.kept; ++i) {
    pollfd fds[2 * kMaxWaitFds] = {};
    size_t n = keeper.wait_fds(fds, kMaxWaitFds);
    Deadline d = keeper.next_deadline();
    if (r.waiter.code() == ErrorCode::kInProgress) {
      n += waiter.wait_fds(fds + n, kMaxWaitFds);
      d = d.min(waiter.next_deadline());
    }
    const int ms = std::min(d.poll_timeout_ms(waiter.clock()), 50);
    (void)::poll(fds, static_cast<nfds_t>(n), ms < 0 ? 50 : ms);
    const Steady::time_point t0 = Steady::now();
    r.kept = keeper.service() == LeaseState::kKeeping;
    if (r.waiter.code() == ErrorCode::kInProgress) r.waiter = waiter.step();
    r.longest = std::max<Nanos>(r.longest, Steady::now() - t0);
  }
  return r;
}

}  // namespace test
}  // namespace edgelock
