// A lease held from a GLib main loop (as ModemManager and NetworkManager
// run): one GSource drives the lock's acquire, the keeper's renewals and the
// release through the non-blocking API (its fds and deadline become the
// source's unix fds and ready time), while the loop keeps serving its other
// sources, here a 10 ms timeout. A stalled server never holds the loop up.
//
//   edgelock-glib-lease [URL] [SECONDS]   (default redis://127.0.0.1:6379, 10)
#include <glib.h>
#include <poll.h>

#include <cstdio>
#include <cstdlib>

#include "edgelock/edgelock.h"

using namespace edgelock;

namespace {

// The lease's side: acquire, keep, release, one step per dispatch.
struct Holder {
  Lock* lock = nullptr;
  LeaseKeeper* keeper = nullptr;
  Nanos hold{0};
  enum { kAcquiring, kHolding, kReleasing } phase = kAcquiring;
  Status s;
  TimePoint release_at{};

  size_t wait_fds(pollfd* out, size_t cap) const {
    return phase == kHolding ? keeper->wait_fds(out, cap) : lock->wait_fds(out, cap);
  }
  Deadline next_deadline() const {
    if (phase != kHolding) return lock->next_deadline();
    return keeper->next_deadline().min(Deadline::at(release_at));
  }
  // Does what is due; false once done.
  bool work() {
    if (s.code() == ErrorCode::kInProgress) s = lock->step();
    if (s.code() == ErrorCode::kInProgress) return true;
    if (phase == kAcquiring) {
      if (!s.ok() || !keeper->start().ok()) return false;
      std::printf("acquired, fence %llu\n", static_cast<unsigned long long>(lock->fence()));
      release_at = lock->clock().now() + hold;
      phase = kHolding;
    }
    if (phase == kHolding) {
      if (keeper->step() == LeaseState::kLost) {
        s = keeper->last_status();
        return false;  // stop touching the device now
      }
      if (lock->clock().now() < release_at) return true;
      keeper->stop();
      phase = kReleasing;
      s = lock->start_release();
      return s.code() == ErrorCode::kInProgress;
    }
    return false;
  }
};

// A GSource over a Holder: after every dispatch its unix fds and ready time
// are set to what the lease waits on next (GLib then polls them with the
// rest of the loop).
struct LeaseSource {
  GSource base;
  Holder* holder;
  GMainLoop* loop;
  gpointer tags[kMaxWaitFds];
  size_t ntags;
};

void rearm(LeaseSource* ls) {
  GSource* src = &ls->base;
  for (size_t i = 0; i < ls->ntags; ++i) g_source_remove_unix_fd(src, ls->tags[i]);
  pollfd fds[kMaxWaitFds];
  ls->ntags = ls->holder->wait_fds(fds, kMaxWaitFds);
  for (size_t i = 0; i < ls->ntags; ++i) {
    const int cond =
        ((fds[i].events & POLLIN) ? G_IO_IN : 0) | ((fds[i].events & POLLOUT) ? G_IO_OUT : 0);
    ls->tags[i] = g_source_add_unix_fd(src, fds[i].fd, static_cast<GIOCondition>(cond));
  }
  const Deadline d = ls->holder->next_deadline();
  const Nanos left = d.remaining(ls->holder->lock->clock());  // ready time is on GLib's clock
  g_source_set_ready_time(src,
                          d.is_never() ? -1 : g_get_monotonic_time() + (left.count() + 999) / 1000);
}

gboolean dispatch(GSource* src, GSourceFunc, gpointer) {
  auto* ls = reinterpret_cast<LeaseSource*>(src);
  if (ls->holder->work()) {
    rearm(ls);
    return G_SOURCE_CONTINUE;
  }
  g_main_loop_quit(ls->loop);
  return G_SOURCE_REMOVE;
}

GSourceFuncs lease_funcs = {nullptr, nullptr, dispatch, nullptr, nullptr, nullptr};

// The loop's other work: a 10 ms tick; records the longest gap.
struct Tick {
  gint64 last;
  gint64 worst;
  uint64_t count;
};

gboolean on_tick(gpointer data) {
  auto* t = static_cast<Tick*>(data);
  const gint64 now = g_get_monotonic_time();
  if (now - t->last > t->worst) t->worst = now - t->last;
  t->last = now;
  ++t->count;
  return G_SOURCE_CONTINUE;
}

}  // namespace

int main(int argc, char** argv) {
  Connection conn;
  Lock lock(conn);
  LockOptions options;
  options.ttl = std::chrono::seconds(3);
  ConnectionOptions co;
  co.command_timeout = std::chrono::milliseconds(500);
  if (!conn.init(argc > 1 ? argv[1] : "redis://127.0.0.1:6379", co).ok() ||
      !lock.init(Bytes::from_cstr("modem"), options).ok()) {
    std::fprintf(stderr, "glib-lease: bad setup: %s\n", conn.last_error());
    return 2;
  }
  LeaseKeeper keeper(lock);
  Holder holder;
  holder.lock = &lock;
  holder.keeper = &keeper;
  holder.hold = std::chrono::seconds(argc > 2 ? std::atoi(argv[2]) : 10);
  GMainLoop* loop = g_main_loop_new(nullptr, FALSE);
  Tick tick{g_get_monotonic_time(), 0, 0};
  g_timeout_add(10, on_tick, &tick);
  holder.s = lock.start_acquire(std::chrono::seconds(5));
  auto* ls = reinterpret_cast<LeaseSource*>(g_source_new(&lease_funcs, sizeof(LeaseSource)));
  ls->holder = &holder;
  ls->loop = loop;
  ls->ntags = 0;
  rearm(ls);
  g_source_set_ready_time(&ls->base, 0);  // first dispatch at once
  g_source_attach(&ls->base, nullptr);
  g_main_loop_run(loop);
  g_source_unref(&ls->base);
  g_main_loop_unref(loop);
  const bool released = holder.phase == Holder::kReleasing && holder.s.ok();
  std::printf("%s: %s (%s); %u renewals, %llu ticks, longest tick gap %.1f ms\n",
              released ? "released" : "ended", holder.s.to_string(), conn.last_error(),
              keeper.stats().renewals, static_cast<unsigned long long>(tick.count),
              static_cast<double>(tick.worst) / 1000.0);
  return released ? 0 : 1;
}
