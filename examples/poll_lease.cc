// A lease held from a plain poll() loop that never blocks on the server:
// the acquire (with its wait), every renewal and the release run as start
// and step calls between the loop's own work, here a 10 ms tick it must
// answer. A stalled or paused server delays the lease, never the tick.
//
//   edgelock-poll-lease [URL] [SECONDS]   (default redis://127.0.0.1:6379, 10)
//
// Try it with the server paused: kill -STOP <redis pid>, then -CONT. The
// tick's longest gap stays near 10 ms; the lease is lost (and said so) only
// if the pause outlasts its validity.
#include <poll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "edgelock/edgelock.h"

using namespace edgelock;

namespace {

// The lease's side of the loop: acquire, keep, release, one step at a time.
class Holder {
 public:
  Holder(Lock& lock, Nanos hold) : lock_(lock), keeper_(lock), hold_(hold) {}

  Status begin() {
    s_ = lock_.start_acquire(std::chrono::seconds(5));
    return s_;
  }
  // What the loop waits on for the lease, and until when.
  size_t wait_fds(pollfd* out, size_t cap) const {
    return phase_ == kHolding ? keeper_.wait_fds(out, cap) : lock_.wait_fds(out, cap);
  }
  Deadline next_deadline() const {
    if (phase_ != kHolding) return lock_.next_deadline();
    return keeper_.next_deadline().min(Deadline::at(release_at_));
  }
  // Does what is due; false once done (result() says how it ended).
  bool work() {
    Clock& clock = lock_.clock();
    if (s_.code() == ErrorCode::kInProgress) s_ = lock_.step();
    if (s_.code() == ErrorCode::kInProgress) return true;
    if (phase_ == kAcquiring) {
      if (!s_.ok() || !keeper_.start().ok()) return false;
      std::printf("acquired, fence %llu\n", static_cast<unsigned long long>(lock_.fence()));
      release_at_ = clock.now() + hold_;
      phase_ = kHolding;
    }
    if (phase_ == kHolding) {
      if (keeper_.step() == LeaseState::kLost) {
        s_ = keeper_.last_status();
        return false;  // stop touching the device now
      }
      if (clock.now() < release_at_) return true;
      keeper_.stop();
      phase_ = kReleasing;
      s_ = lock_.start_release();
      return s_.code() == ErrorCode::kInProgress;
    }
    return false;  // the release ended
  }
  Status result() const { return s_; }
  bool released() const { return phase_ == kReleasing; }
  uint32_t renewals() const { return keeper_.stats().renewals; }

 private:
  enum Phase { kAcquiring, kHolding, kReleasing };
  Lock& lock_;
  LeaseKeeper keeper_;
  Nanos hold_;
  Phase phase_ = kAcquiring;
  Status s_;
  TimePoint release_at_{};
};

int tick_fd(long period_ns) {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  itimerspec its{};
  its.it_interval.tv_nsec = period_ns;
  its.it_value.tv_nsec = period_ns;
  if (fd >= 0) timerfd_settime(fd, 0, &its, nullptr);
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  Connection conn;
  Lock lock(conn);
  LockOptions options;
  options.ttl = std::chrono::seconds(3);
  ConnectionOptions co;
  co.command_timeout = std::chrono::milliseconds(500);  // a renewal lost in 0.5 s is retried
  if (!conn.init(argc > 1 ? argv[1] : "redis://127.0.0.1:6379", co).ok() ||
      !lock.init(Bytes::from_cstr("modem"), options).ok()) {
    std::fprintf(stderr, "poll-lease: bad setup: %s\n", conn.last_error());
    return 2;
  }
  Holder holder(lock, std::chrono::seconds(argc > 2 ? std::atoi(argv[2]) : 10));
  const int tick = tick_fd(10 * 1000 * 1000);
  Clock& clock = conn.clock();
  TimePoint last_tick = clock.now();
  Nanos worst{0};
  uint64_t ticks = 0;
  bool busy = holder.begin().code() == ErrorCode::kInProgress || holder.result().ok();
  while (busy) {
    pollfd fds[1 + kMaxWaitFds] = {{tick, POLLIN, 0}};
    const size_t n = 1 + holder.wait_fds(fds + 1, kMaxWaitFds);
    poll(fds, n, holder.next_deadline().poll_timeout_ms(clock));
    uint64_t expirations = 0;
    if ((fds[0].revents & POLLIN) && read(tick, &expirations, sizeof expirations) > 0) {
      const TimePoint now = clock.now();  // the loop's own work: answer the tick
      if (now - last_tick > worst) worst = now - last_tick;
      last_tick = now;
      ticks += expirations;
    }
    busy = holder.work();
  }
  close(tick);
  std::printf("%s: %s (%s); %u renewals, %llu ticks, longest tick gap %.1f ms\n",
              holder.released() ? "released" : "ended", holder.result().to_string(),
              conn.last_error(), holder.renewals(), static_cast<unsigned long long>(ticks),
              std::chrono::duration<double, std::milli>(worst).count());
  return holder.released() && holder.result().ok() ? 0 : 1;
}
