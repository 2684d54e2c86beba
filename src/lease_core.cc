// LeaseCore: key, timing, validity, tokens, counters and the retry loop
// every primitive shares.
#include "edgelock/detail/lease_core.h"

#include <cstring>

#include "lease_util.h"
#include "lock_keys.h"
#include "metrics_note.h"
#include "validity.h"

namespace edgelock {
namespace detail {

namespace {

// A second guard behind every wait's deadline: the shortest pause is 1 ms
// (rate limiters) or retry_min, so this is over 16 minutes of waiting.
constexpr uint32_t kMaxAttempts = 1000000;

bool valid_timing(const LeaseTiming& t) {
  return t.ttl >= Millis(1) && t.ttl <= kMaxTtl && t.drift_factor >= 0.0 &&
         t.drift_factor <= 0.5 && t.retry_min > Nanos::zero() && t.retry_max >= t.retry_min;
}

bool wants_retry(Status s, RetryOn on) {
  if (on == RetryOn::kTransient) return retryable(s.code());
  return s.code() == ErrorCode::kBusy || s.code() == ErrorCode::kExpired;
}

}  // namespace

Status LeaseCore::init(Bytes key, bool companions, const LeaseTiming& timing) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (!valid_timing(timing)) return ErrorCode::kInvalidArgument;
  if (companions) {
    // Every companion is the key plus a short suffix (lock_keys.h): the
    // longest one fitting means they all do.
    CompanionKey c;
    if (!companion_key(key, ":fence", c.data, sizeof c.data).ok()) return ErrorCode::kInvalidArgument;
    EDGELOCK_TRY(backend_->check_key(key));
  }
  EDGELOCK_TRY(rng_.seed_from_os());
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  timing_ = timing;
  backoff_ = Backoff(timing.retry_min, timing.retry_max);
  busy_ttl_ = Millis(0);
  return Status();
}

Bytes LeaseCore::companion(const char* suffix, CompanionKey* out) const {
  const Result<size_t> n = companion_key(key(), suffix, out->data, sizeof out->data);
  out->len = n.ok() ? n.value() : 0;
  return out->bytes();
}

TimePoint LeaseCore::validity_end(TimePoint start, Millis ttl) const {
  return detail::validity_end(start, ttl, timing_.drift_factor);
}

TimePoint LeaseCore::least_end(TimePoint old_end, TimePoint start, Millis ttl) const {
  return detail::least_end(old_end, start, ttl, timing_.drift_factor);
}

Nanos LeaseCore::left(TimePoint valid_until) const {
  const Nanos l = valid_until - clock().now();
  return l > Nanos::zero() ? l : Nanos::zero();
}

Deadline LeaseCore::renewal_deadline(TimePoint valid_until, TimePoint start) const {
  // Waiting past the validity would only delay the caller's reaction to
  // the loss.
  const Deadline d = io_deadline();
  return valid_until > start ? d.min(Deadline::at(valid_until)) : d;
}

Status LeaseCore::mint(char* out, size_t hex_len) {
  if (hex_len % 2 != 0 || hex_len > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  return random_hex(out, hex_len / 2);
}

Status LeaseCore::noted(EventKind kind, TimePoint start, Status s) {
  Connection& c = connection();
  note(c, metrics_, kind, s, key(), c.clock().now() - start);
  return s;
}

Nanos LeaseCore::backoff_delay(Status last, Nanos left) {
  Nanos delay = backoff_.next(rng_);
  // A busy lease frees by expiry at the latest: no point sleeping past it.
  // A holder without TTL (reported as 0) gets the plain backoff: capping at
  // 1 ms would poll it a thousand times a second.
  const Nanos expiry = busy_ttl_ + Millis(1);
  if (last.code() == ErrorCode::kBusy && busy_ttl_ > Millis(0) && expiry < delay) delay = expiry;
  return delay < left ? delay : left;
}

Status LeaseCore::retry(Status s, Deadline deadline, RetryOn on, Step step, void* self) {
  Clock& c = clock();
  // The whole call ends by the wait + one command budget: the last attempt
  // may start just before the wait runs out and still needs its round trip.
  const Deadline op_deadline =
      deadline.is_never() ? deadline : Deadline::at(deadline.when() + command_timeout());
  backoff_.reset();
  // Bounded by the deadline; the count is a second guard.
  for (uint32_t i = 0; i < kMaxAttempts && !s.ok() && wants_retry(s, on); ++i) {
    const Nanos left = deadline.remaining(c);
    if (left <= Nanos::zero()) break;
    s = step(self, s, left, op_deadline);
  }
  return s;
}

}  // namespace detail
}  // namespace edgelock
