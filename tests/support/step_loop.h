#pragma once
// The caller's poll() loop of the start/step tests over Sentinel and
// Cluster: poll() on what an operation waits on until its next deadline,
// then step(); counts the steps and times the longest.

#include <gtest/gtest.h>
#include <poll.h>

#include <algorithm>
#include <chrono>

#include "edgelock/clock.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"
#include "redis_server.h"

namespace edgelock {
namespace test {

/// Longest step() the loops accept: a step moves bytes, never waits.
inline Nanos step_bound() { return Millis(20) * slowdown(); }

/// `d` in ms with its fraction (for printing).
inline double ms_of(Nanos d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct StepLoop {
  using Steady = std::chrono::steady_clock;
  /// A drive() gives up after `default_steps` steps (unless told) or
  /// `seconds` (times the slowdown).
  StepLoop(int default_steps, int seconds) : default_steps_(default_steps), seconds_(seconds) {}

  int steps = 0;
  Nanos longest{0};

  /// Drives `op` from `s` until done (at most `max_steps` steps);
  /// `between` runs once, after `at` steps, outside any step().
  template <class Op, class F>
  Status drive(Op& op, Status s, int max_steps, int at, F between) {
    const Steady::time_point end = Steady::now() + std::chrono::seconds(seconds_ * slowdown());
    for (int i = 0; i < max_steps && s.code() == ErrorCode::kInProgress && Steady::now() < end;
         ++i) {
      if (i == at) between();
      pollfd fds[kMaxWaitFds];
      const size_t n = op.wait_fds(fds, kMaxWaitFds);
      const Deadline d = op.next_deadline();
      EXPECT_FALSE(d.is_never()) << "an operation in flight always has a next deadline";
      const int timeout = std::min(d.poll_timeout_ms(default_clock()), 1000);
      poll(fds, n, timeout < 0 ? 1000 : timeout);
      s = timed_step(op);
    }
    return s;
  }
  template <class Op>
  Status drive(Op& op, Status s, int max_steps) {
    return drive(op, s, max_steps, -1, [] {});
  }
  template <class Op>
  Status drive(Op& op, Status s) {
    return drive(op, s, default_steps_, -1, [] {});
  }

  /// Drives `n` leases at once from one poll(): st[i] is ops[i]'s status,
  /// each stepped while kInProgress. Returns when `done()` (asked between
  /// rounds) is true, every op has ended, or after `limit`.
  template <class F>
  bool drive_all(Lease* const* ops, Status* st, size_t n, Nanos limit, F done) {
    const Steady::time_point end = Steady::now() + limit;
    for (int round = 0; round < 100000 && Steady::now() < end; ++round) {
      if (done()) return true;
      pollfd fds[8];
      size_t nfds = 0;
      Deadline next = Deadline::never();
      bool any = false;
      for (size_t i = 0; i < n; ++i) {
        if (st[i].code() != ErrorCode::kInProgress) continue;
        any = true;
        nfds += ops[i]->wait_fds(fds + nfds, sizeof fds / sizeof fds[0] - nfds);
        next = next.min(ops[i]->next_deadline());
      }
      if (!any) return done();
      const int timeout = std::min(next.poll_timeout_ms(default_clock()), 100);
      poll(fds, nfds, timeout < 0 ? 100 : timeout);
      for (size_t i = 0; i < n; ++i) {
        if (st[i].code() == ErrorCode::kInProgress) st[i] = timed_step(*ops[i]);
      }
    }
    return done();
  }

 private:
  template <class Op>
  Status timed_step(Op& op) {
    const Steady::time_point t0 = Steady::now();
    const Status s = op.step();
    longest = std::max<Nanos>(longest, Steady::now() - t0);
    ++steps;
    return s;
  }

  int default_steps_;
  int seconds_;
};

}  // namespace test
}  // namespace edgelock
