#pragma once
// A keeper renewing one lease while another handle's acquire waits, both
// on one back end, driven from one poll() loop: what a firmware loop does
// with a lease it keeps and a second resource it waits for.

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "edgelock/fair_lock.h"
#include "edgelock/lease.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"
#include "redis_server.h"
#include "step_loop.h"

namespace edgelock {
namespace test {

struct KeeperBeside {
  Status waiter = ErrorCode::kInProgress;  // the waiter's last step()
  Nanos longest{0};                        // longest keeper step() + lease step()
  bool kept = true;                        // step() never said kLost
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
    r.kept = keeper.step() == LeaseState::kKeeping;
    if (r.waiter.code() == ErrorCode::kInProgress) r.waiter = waiter.step();
    r.longest = std::max<Nanos>(r.longest, Steady::now() - t0);
  }
  return r;
}

/// The whole check, on a back end `a` and `waiter` share (the node or
/// primary serving both at `port`): a keeper renews `a` (held) every
/// 200 ms while `waiter` (its key held by another client) waits 2 s; every
/// renewal goes through, and the waiter polls rather than BLPOP there.
inline void expect_kept_beside(Lease& a, FairLock& waiter, int port) {
  KeeperOptions ko;
  ko.renew_every = Millis(200) * slowdown();
  LeaseKeeper keeper(a, ko);
  const Status started = keeper.start();
  ASSERT_TRUE(started.ok()) << started.to_string();
  const uint32_t blpops = command_calls(port, "blpop");
  const KeeperBeside r = keep_beside(
      keeper, waiter, waiter.start_acquire(Millis(2000) * slowdown()), Millis(2500) * slowdown());
  std::printf("beside a fair waiter: renewals %u, failures %u, longest %.3f ms\n",
              keeper.stats().renewals, keeper.stats().failures,
              std::chrono::duration<double, std::milli>(r.longest).count());
  EXPECT_TRUE(r.kept) << keeper.loss_text();
  EXPECT_EQ(keeper.stats().failures, 0u);
  EXPECT_GE(keeper.stats().renewals, 8u) << "one renewal every 200 ms";
  EXPECT_EQ(command_calls(port, "blpop"), blpops) << "a waiter beside another handle polls";
  EXPECT_NE(r.waiter.code(), ErrorCode::kOk) << "the holder never let go";
  EXPECT_NE(r.waiter.code(), ErrorCode::kInProgress);
  EXPECT_FALSE(waiter.held());
  EXPECT_LT(r.longest, step_bound());
  keeper.stop();
}

}  // namespace test
}  // namespace edgelock
