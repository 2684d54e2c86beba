#pragma once
// Internal: what every primitive (Lock, ReentrantLock, Semaphore, and the
// rate gate under Cooldown and Quota) holds by composition
// (src/lease_core.cc): the back end, the key checked once with its
// companion keys, the timing checked once, one validity rule, token
// minting, the handle's counters, and the one bounded retry loop of every
// wait. Fixed size, no heap.

#include <cstddef>
#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/backoff.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/limits.h"
#include "edgelock/metrics.h"
#include "edgelock/random.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// The timing a primitive's options carry, checked once by init().
struct LeaseTiming {
  /// Lease (or period, window) length. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// Local validity = ttl - elapsed - (ttl * drift_factor + 2 ms). 0 .. 0.5.
  double drift_factor = 0.01;
  /// Backoff between attempts while waiting. 0 < retry_min <= retry_max.
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
};

/// A companion key's name ("{key}:fence"), kept by the primitive using it.
struct CompanionKey {
  size_t len = 0;
  uint8_t data[kMaxKeyLen + 8];
  Bytes bytes() const { return Bytes(data, len); }
};

/// Which failures a wait retries.
enum class RetryOn : uint8_t {
  kTransient,  ///< Busy, expired (late grant) and connection trouble.
  kRefusal,    ///< Busy and expired only (rate limiters).
};

class LeaseCore {
 public:
  explicit LeaseCore(Backend& backend) : backend_(&backend) {}
  LeaseCore(const LeaseCore&) = delete;
  LeaseCore& operator=(const LeaseCore&) = delete;

  /// Checks the key (1 .. kMaxKeyLen bytes) and the timing, seeds the
  /// jitter and keeps them. With `fence` (and `wake`), also writes the
  /// key's companions ":fence" (":wake") there (lock_keys.h) and checks
  /// that the back end can serve them with the key (Backend::check_key).
  /// The core is unchanged on error. Errors: kInvalidArgument,
  /// kRandomFailed.
  Status init(Bytes key, const LeaseTiming& timing, CompanionKey* fence = nullptr,
              CompanionKey* wake = nullptr);
  /// True once init() succeeded.
  bool ready() const { return key_len_ > 0; }

  Bytes key() const { return Bytes(key_, key_len_); }
  Backend& backend() const { return *backend_; }
  Clock& clock() const { return backend_->clock(); }
  Nanos command_timeout() const { return backend_->command_timeout(); }
  /// The connection serving the key (through Sentinel or Cluster, if used).
  Connection& connection() const;
  /// A well-formed reply that is not ours: Connection::reject_reply() on
  /// the serving connection (closes it). Returns kProtocol.
  Status reject(const char* what) const;
  /// One command timeout from now.
  Deadline io_deadline() const;

  /// When a lease of `ttl` asked for at `start` stops being safe to use.
  TimePoint validity_end(TimePoint start, Millis ttl) const;
  /// After a request for `ttl` sent at `start` whose outcome is unknown:
  /// the earlier of `old_end` and what the request could have set.
  TimePoint least_end(TimePoint old_end, TimePoint start, Millis ttl) const;
  /// Time left until `valid_until` (0 once passed).
  Nanos left(TimePoint valid_until) const;
  /// A renewal's deadline: one command timeout, but no later than
  /// `valid_until` while that is ahead of `start`.
  Deadline renewal_deadline(TimePoint valid_until, TimePoint start) const;

  /// Writes `hex_len` (even, <= kMaxTokenLen) random hex characters to
  /// `out`: tokens, permit ids, owner ids. Errors: kRandomFailed.
  static Status mint(char* out, size_t hex_len) { return random_hex(out, hex_len / 2); }

  /// Counts one operation that started at `start` in metrics() and in the
  /// serving connection's (which calls its event hook). Returns `s`.
  Status noted(EventKind kind, TimePoint start, Status s);
  const Metrics& metrics() const { return metrics_; }
  void reset_metrics() { metrics_.reset(); }

  /// The holder's TTL seen by the last busy attempt (0: none or no TTL).
  Millis busy_ttl() const { return busy_ttl_; }
  void set_busy_ttl(Millis ttl) { busy_ttl_ = ttl; }
  Prng& rng() { return rng_; }
  /// The next jittered backoff delay, cut to the holder's TTL when `last`
  /// is kBusy and the holder has one (it frees by then at the latest), and
  /// to `left`.
  Nanos backoff_delay(Status last, Nanos left);

  /// One step of a wait after the retryable failure `last`: pause as the
  /// primitive sees fit (at most `left`), then attempt again within
  /// `op_deadline`; returns that attempt's status.
  using Step = Status (*)(void* self, Status last, Nanos left, Deadline op_deadline);
  /// The deadline of a wait of `wait` from now (negative or kForever: never).
  Deadline wait_deadline(Nanos wait) const { return Deadline::after(clock(), wait); }
  /// The one retry loop: after the first attempt's status `first`, runs
  /// `step` while the last status is retryable (`on`) and `deadline` has
  /// not passed, within a bounded count. Attempts end by deadline + one
  /// command timeout (the last round trip's budget). Returns the last
  /// status.
  Status retry(Status first, Deadline deadline, RetryOn on, Step step, void* self);

 private:
  // Small fields first: short offsets, shorter code on Thumb-2.
  Backend* backend_;
  size_t key_len_ = 0;
  Millis busy_ttl_{0};
  double drift_factor_ = 0.01;
  Prng rng_;
  Backoff backoff_{Millis(2), Millis(250)};
  Metrics metrics_;
  uint8_t key_[kMaxKeyLen] = {};
};

}  // namespace detail
}  // namespace edgelock
