// A demo worker: takes the device lock (a Lock, or a FairLock), keeps it
// with the LeaseKeeper from a poll() loop while writing to the fenced
// device, and sometimes hangs past its TTL or crashes on purpose.
#include "demo_worker.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace demo {

using edgelock::Deadline;
using edgelock::ErrorCode;
using edgelock::FairLock;
using edgelock::Lease;
using edgelock::LeaseKeeper;
using edgelock::LeaseState;
using edgelock::Lock;
using edgelock::Millis;
using edgelock::Nanos;
using edgelock::TimePoint;

namespace {

constexpr Nanos kWriteEvery = Millis(20);
constexpr Nanos kMaxWait = Millis(5000);  // then count a give-up and go on waiting

uint32_t next_random(uint32_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

struct Hold {
  Device* dev;
  Lease* lock;
  int id;
  uint64_t fence;
  int writes = 0;
};

// Well-behaved holding: write only while the keeper says the lease is ours.
// Returns false if the lease was lost.
bool hold_for(Hold& h, Nanos duration) {
  edgelock::Clock& clock = h.lock->clock();
  LeaseKeeper keeper(*h.lock);
  if (!keeper.start().ok()) return false;
  const TimePoint end = clock.now() + duration;
  TimePoint next_write = clock.now();
  uint32_t renewals = 0;
  for (int i = 0; i < 100000 && clock.now() < end; ++i) {
    const Deadline d = keeper.next_deadline().min(Deadline::at(next_write)).min(Deadline::at(end));
    poll(nullptr, 0, d.poll_timeout_ms(clock));
    if (keeper.step() == LeaseState::kLost) {
      h.dev->lost_detected.fetch_add(1);
      h.dev->end(h.id);
      say(*h.dev, h.id, "keeper: %s -> stops using the device", keeper.loss_text());
      return false;
    }
    if (keeper.stats().renewals != renewals) {
      renewals = keeper.stats().renewals;
      h.dev->renewals.fetch_add(1);
      h.dev->renewed(h.id, mono_ns() + h.lock->remaining().count());
    }
    if (clock.now() >= next_write) {
      if (!h.dev->write(h.fence))
        say(*h.dev, h.id, "device REJECTED write with fence %llu", (unsigned long long)h.fence);
      ++h.writes;
      next_write += kWriteEvery;
    }
  }
  keeper.stop();
  return true;
}

// A holder that freezes (SIGSTOP; the driver resumes it after more than a
// TTL), then writes once without checking its lease, as buggy code would.
void hang_then_write(Hold& h, int64_t ttl_ms) {
  h.dev->write(h.fence);
  h.dev->hangs.fetch_add(1);
  say(*h.dev, h.id, "HANGS (SIGSTOP) holding fence %llu, longer than the %lld ms TTL",
      (unsigned long long)h.fence, (long long)ttl_ms);
  raise(SIGSTOP);
  LeaseKeeper keeper(*h.lock);
  const bool stale_ok = h.dev->write(h.fence);
  say(*h.dev, h.id, "resumes; unchecked write with old fence %llu: %s", (unsigned long long)h.fence,
      stale_ok ? "accepted (no newer holder yet)" : "REJECTED by the device's fencing check");
  // The keeper knows at once: the local validity ran out while we slept.
  if (!keeper.start().ok() || keeper.step() == LeaseState::kLost) {
    h.dev->lost_detected.fetch_add(1);
    say(*h.dev, h.id, "keeper: lease LOST (validity ran out) -> stops using the device");
  }
  h.dev->end(h.id);
  const edgelock::Status s = h.lock->release();
  if (s.code() == ErrorCode::kNotOwner)
    say(*h.dev, h.id, "release: not owner (the key expired or moved on)");
}

}  // namespace

void say(const Device& dev, int worker, const char* fmt, ...) {
  char text[200];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  char line[256];
  const double t = static_cast<double>(mono_ns() - dev.start_ns) / 1e9;
  const int n = std::snprintf(line, sizeof line, "  %7.3fs  w%-2d  %s\n", t, worker, text);
  if (n > 0) {
    const ssize_t w =
        write(1, line, static_cast<size_t>(n < (int)sizeof line ? n : (int)sizeof line - 1));
    (void)w;
  }
}

namespace {

enum class Fate { kNormal, kLong, kHang, kCrash };

Fate pick_fate(const Config& cfg, int id, int grant_no, uint32_t* rng) {
  // A few fixed mishaps so every run shows them; the rest is random.
  if (cfg.hang_pct > 0 && ((id == 1 && grant_no == 2) || (id == 6 && grant_no == 3)))
    return Fate::kHang;
  if (cfg.crash_pct > 0 && id == 4 && grant_no == 2) return Fate::kCrash;
  const int roll = static_cast<int>(next_random(rng) % 100);
  if (roll < cfg.crash_pct) return Fate::kCrash;
  if (roll < cfg.crash_pct + cfg.hang_pct) return Fate::kHang;
  if (roll >= 100 - cfg.long_pct) return Fate::kLong;
  return Fate::kNormal;
}

// One grant: use the device as the fate says, then let go.
void use_device(Device& dev, const Config& cfg, Lease& lock, int id, int grant_no,
                int64_t waited_us, uint32_t* rng) {
  dev.record_wait(waited_us);
  dev.grants.fetch_add(1);
  Hold h{&dev, &lock, id, lock.fence()};
  dev.begin(id, h.fence, mono_ns() + lock.remaining().count());
  const Fate fate = pick_fate(cfg, id, grant_no, rng);
  say(dev, id, "granted fence %-4llu after waiting %4lld ms%s", (unsigned long long)h.fence,
      (long long)(waited_us / 1000), fate == Fate::kLong ? "  (long job: the keeper renews)" : "");
  if (fate == Fate::kCrash) {
    dev.write(h.fence);
    say(dev, id, "CRASHES holding fence %llu (SIGKILL, no release): the lock frees at its TTL",
        (unsigned long long)h.fence);
    dev.end(id);  // a dead process believes nothing
    kill(getpid(), SIGKILL);
  }
  if (fate == Fate::kHang) {
    hang_then_write(h, cfg.ttl_ms);
    return;
  }
  const Nanos hold = fate == Fate::kLong
                         ? Millis(cfg.ttl_ms * 6 / 5 + next_random(rng) % (cfg.ttl_ms * 4 / 5))
                         : Millis(40 + next_random(rng) % 160);
  if (!hold_for(h, hold)) {
    lock.release().ignore();
    return;
  }
  dev.end(id);  // stop believing before handing the lock back
  const edgelock::Status r = lock.release();
  say(dev, id, "released fence %-4llu after %d writes%s", (unsigned long long)h.fence, h.writes,
      r.ok() ? "" : " (release failed)");
  // Off the device for a while (using the result), so others get turns.
  poll(nullptr, 0, static_cast<int>(100 + next_random(rng) % 400));
}

// One slice of a wait. A FairLock keeps its place in the queue from one
// slice to the next (a give-up is counted, the wait goes on).
edgelock::Status acquire_slice(Lock& lock, Nanos wait) { return lock.acquire(wait); }
edgelock::Status acquire_slice(FairLock& lock, Nanos wait) {
  return lock.acquire(wait, edgelock::GiveUp::kStay);
}

template <typename L, typename Options>
int run_worker(Device& dev, const Config& cfg, int id) {
  edgelock::Connection conn;
  edgelock::ConnectionOptions co;
  co.command_timeout = Millis(cfg.ttl_ms / 4);
  L lock(conn);
  Options lo;
  lo.ttl = Millis(cfg.ttl_ms);
  if (!conn.init(cfg.url, co).ok() || !lock.init(edgelock::Bytes::from_cstr(cfg.key), lo).ok()) {
    say(dev, id, "setup failed: %s", conn.last_error());
    return 2;
  }
  uint32_t rng = static_cast<uint32_t>(getpid()) * 2654435761u + static_cast<uint32_t>(id);
  int grants = 0;
  int64_t wanted_since = 0;  // the wait counts from the first slice
  int grants_before[kMaxWorkers] = {};
  for (int round = 0; round < 100000; ++round) {
    const Nanos left(dev.stop_ns - mono_ns());
    if (left <= Nanos::zero()) break;
    if (wanted_since == 0) {
      wanted_since = mono_ns();
      dev.snapshot(grants_before);
    }
    const Nanos wait = left < kMaxWait ? left : kMaxWait;
    const edgelock::Status s = acquire_slice(lock, wait);
    if (s.ok()) {
      dev.note_passes(id, grants_before);
      use_device(dev, cfg, lock, id, ++grants, (mono_ns() - wanted_since) / 1000, &rng);
      wanted_since = 0;
    } else if (s.code() == ErrorCode::kBusy || s.code() == ErrorCode::kExpired) {
      if (wait == kMaxWait) dev.gave_up.fetch_add(1);
    } else {
      dev.errors.fetch_add(1);
      say(dev, id, "acquire failed: %s (%s)", s.to_string(), conn.last_error());
      lock.release().ignore();  // the grant may have landed; also leaves the queue
      wanted_since = 0;
    }
  }
  return 0;
}

}  // namespace

int worker_main(Device& dev, const Config& cfg, int id) {
  return cfg.fair ? run_worker<FairLock, edgelock::FairLockOptions>(dev, cfg, id)
                  : run_worker<Lock, edgelock::LockOptions>(dev, cfg, id);
}

}  // namespace demo
