// LeaseCore: key, timing, validity, tokens, counters and the backoff
// every primitive shares.
#include "edgelock/detail/lease_core.h"

#include "edgelock/bytes.h"

#include <cstring>

#include "base/lock_keys.h"
#include "base/validity.h"
#include "edgelock/connection.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/reply.h"
#include "lease/lease_util.h"

namespace edgelock {
namespace detail {

void DecimalText::set(int64_t v) {
  ByteBuilder b(reinterpret_cast<uint8_t*>(text), sizeof text);
  b.append_decimal(v);
  len = static_cast<uint8_t>(b.size());
}

LeaseCore::LeaseCore(Backend& backend) : backend_(&backend) { ++backend.leases_; }

LeaseCore::~LeaseCore() {
  if (Connection* c = backend_->direct()) io(*c).leave_queue(this);
  --backend_->leases_;
}

bool LeaseCore::shared() const { return backend_->leases_ > 1; }

namespace {

bool valid_timing(const LeaseTiming& t) {
  return t.ttl >= Millis(1) && t.ttl <= kMaxTtl && t.drift_factor >= 0.0 && t.drift_factor <= 0.5 &&
         t.retry_min > Nanos::zero() && t.retry_max >= t.retry_min && t.retry_max <= kMaxTtl;
}

}  // namespace

Status CompanionKey::set(Bytes key, Bytes suffix) {
  ByteBuilder b(data, sizeof data);
  append_companion(b, key, suffix);
  if (!b.status().ok()) return ErrorCode::kInvalidArgument;
  len = b.size();
  return Status();
}

Status LeaseCore::init(Bytes key, const LeaseTiming& timing, Span<const Bytes> companions) {
  init_fault_ = key.size == 0 || !key.data ? 1
                : key.size > kMaxKeyLen    ? 2
                : valid_timing(timing)     ? 0
                                           : 3;
  if (init_fault_ != 0) return ErrorCode::kInvalidArgument;
  if (!companions.empty()) {
    for (const Bytes& suffix : companions) {
      if (companion_length(key, suffix) > kMaxCompanionLen) return ErrorCode::kInvalidArgument;
    }
    EDGELOCK_TRY(backend_->check_key(key));
  }
  EDGELOCK_TRY(rng_.seed_from_os());
  std::memcpy(key_, key.data, key.size);
  key_len_ = static_cast<uint16_t>(key.size);
  drift_factor_ = timing.drift_factor;
  backoff_ = Backoff(timing.retry_min, timing.retry_max);
  busy_ttl_ = Millis(0);
  return Status();
}

TimePoint LeaseCore::validity_end(TimePoint start, Millis ttl) const {
  return detail::validity_end(start, ttl, drift_factor_);
}

TimePoint LeaseCore::least_end(TimePoint old_end, TimePoint start, Millis ttl) const {
  const TimePoint e = validity_end(start, ttl);
  return e < old_end ? e : old_end;
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

Status LeaseCore::noted(EventKind kind, TimePoint start, Status s) const {
  const Nanos latency = clock().now() - start;
  detail::io(connection()).note_event(kind, s, key(), latency);
  return s;
}

Status LeaseCore::finish(EventKind kind, TimePoint start, Status s) {
  if (s.code() == ErrorCode::kInProgress) return s;
  return end_op(noted(kind, start, s));
}

Status LeaseCore::after_attempt(Status s, TimePoint start) {
  s = noted(EventKind::kAcquire, start, s);
  Nanos left{0};
  if (wait_on(s, &left)) return pause(backoff_delay(s, left));
  return end_op(s);
}

Connection& LeaseCore::connection() const { return backend_->connection_for(key()); }

Status LeaseCore::reject(const char* what) const {
  return detail::io(connection()).reject_reply(what);
}

Deadline LeaseCore::io_deadline() const { return Deadline::after(clock(), command_timeout()); }

Status LeaseCore::key_status_of(const Result<const Reply*>& r, KeyStatus* out) const {
  if (!r.ok()) return r.status();
  const int64_t pttl = r.value()->integer;
  if (r.value()->type != ReplyType::kInteger || pttl < -2) {
    return reject("PTTL wants an integer >= -2");
  }
  out->held = pttl != -2;
  out->expires = pttl >= 0;
  out->ttl = Millis(out->expires ? pttl : 0);
  return Status();
}

Nanos LeaseCore::backoff_delay(Status last, Nanos left) {
  Nanos delay = backoff_.next(rng_);
  // A busy lease frees by expiry at the latest: no point sleeping past it.
  // A holder without TTL (reported as 0) gets the plain backoff: capping at
  // 1 ms would poll it a thousand times a second.
  // Compared in ms: a holder's TTL in ns may not fit (centuries are allowed).
  if (last.code() == ErrorCode::kBusy && busy_ttl_ > Millis(0) &&
      busy_ttl_ < std::chrono::floor<Millis>(delay)) {
    delay = busy_ttl_ + Millis(1);
  }
  return delay < left ? delay : left;
}

}  // namespace detail
}  // namespace edgelock
