// Reentrant lock: one script call per operation, depth kept on the server.
#include "edgelock/reentrant_lock.h"

#include <cstring>

#include "lease_util.h"
#include "lock_keys.h"
#include "metrics_note.h"
#include "reentrant_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kOwnerRandomBytes = 16;  // 128 bits -> 32 hex chars
constexpr uint32_t kMaxDepth = 1u << 31;
}  // namespace

Status ReentrantLock::init(Bytes key, const ReentrantLockOptions& options, Bytes owner) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (options.ttl < Millis(1) || options.ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!(options.drift_factor >= 0.0 && options.drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  if (options.retry_min <= Nanos::zero() || options.retry_max < options.retry_min) {
    return ErrorCode::kInvalidArgument;
  }
  if (owner.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  const Result<size_t> fk = detail::companion_key(key, ":fence", fence_key_, sizeof fence_key_);
  if (!fk.ok()) return fk.status();
  EDGELOCK_TRY(rng_.seed_from_os());
  EDGELOCK_TRY(random_hex(handle_, sizeof handle_ / 2));
  if (owner.size == 0) {
    EDGELOCK_TRY(random_hex(owner_, kOwnerRandomBytes));
    owner_len_ = 2 * kOwnerRandomBytes;
  } else {
    std::memcpy(owner_, owner.data, owner.size);
    owner_len_ = owner.size;
  }
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  fence_key_len_ = fk.value();
  options_ = options;
  backoff_ = Backoff(options.retry_min, options.retry_max);
  forget();
  return Status();
}

void ReentrantLock::forget() {
  depth_ = 0;
  most_ = 0;
  valid_until_ = TimePoint();
  fence_ = 0;
}

void ReentrantLock::maybe_holds(uint32_t levels) {
  if (levels > most_) most_ = levels;
}

Deadline ReentrantLock::io_deadline() const {
  return Deadline::after(conn_->clock(), conn_->options().command_timeout);
}

Nanos ReentrantLock::remaining() const {
  if (depth_ == 0) return Nanos::zero();
  const Nanos left = valid_until_ - conn_->clock().now();
  return left > Nanos::zero() ? left : Nanos::zero();
}

uint32_t ReentrantLock::depth() const { return remaining() > Nanos::zero() ? depth_ : 0; }

Status ReentrantLock::noted(EventKind kind, TimePoint start, Status s) {
  detail::note(*conn_, metrics_, kind, s, key(), conn_->clock().now() - start);
  return s;
}

Status ReentrantLock::attempt(Deadline deadline) {
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kAcquire, t0, send_acquire(deadline));
}

Status ReentrantLock::send_acquire(Deadline deadline) {
  const uint32_t want = depth_ + 1;
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText want_text(want);
  const detail::DecimalText most(most_ > want ? most_ : want);
  const Bytes keys[2] = {key(), Bytes(fence_key_, fence_key_len_)};
  const Bytes args[5] = {owner(), ttl.bytes(), want_text.bytes(), handle(), most.bytes()};
  const TimePoint start = conn_->clock().now();
  const Result<const Reply*> r = conn_->eval({&detail::kReentrantAcquireScript, keys, args}, deadline);
  int64_t code = 0, value = 0;
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && (!detail::int_at(r.value(), 0, &code) || !detail::int_at(r.value(), 1, &value))) {
    s = ErrorCode::kProtocol;
  }
  if (!s.ok()) {
    // The level may have landed (and re-armed the TTL, maybe shorter):
    // count it for release(), claim the least validity.
    if (detail::may_have_run(s.code())) unknown_outcome(want, start, options_.ttl);
    return s;
  }
  if (code == 0) {
    most_ = depth_;  // someone else holds it: no level of ours is there
    busy_ttl_ = Millis(value);
    return ErrorCode::kBusy;
  }
  if (code < 0 || code != static_cast<int64_t>(want)) {
    forget();  // expired or changed under us: no level is ours any more
    return ErrorCode::kNotOwner;
  }
  depth_ = most_ = want;
  fence_ = static_cast<uint64_t>(value);
  valid_until_ = detail::lease_end(start, options_.ttl, options_.drift_factor);
  if (remaining() <= Nanos::zero()) {
    release().ignore();  // this level came too late to use: hand it back
    return ErrorCode::kExpired;
  }
  return Status();
}

void ReentrantLock::unknown_outcome(uint32_t most, TimePoint start, Millis ttl) {
  maybe_holds(most);
  valid_until_ = detail::least_end(valid_until_, start, ttl, options_.drift_factor);
}

Status ReentrantLock::try_acquire() {
  if (key_len_ == 0 || depth_ >= kMaxDepth) return ErrorCode::kInvalidArgument;
  return attempt(io_deadline());
}

Status ReentrantLock::acquire(Nanos wait) {
  if (key_len_ == 0 || depth_ >= kMaxDepth) return ErrorCode::kInvalidArgument;
  Clock& clock = conn_->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  const Deadline op_deadline =
      deadline.is_never() ? deadline : Deadline::at(deadline.when() + conn_->options().command_timeout);
  Status s = attempt(io_deadline());
  backoff_.reset();
  for (uint32_t i = 0; !s.ok() && detail::retryable(s.code()) && i < 1000000; ++i) {
    Nanos delay = backoff_.next(rng_);
    const Nanos expiry = busy_ttl_ + Millis(1);
    if (s.code() == ErrorCode::kBusy && expiry < delay) delay = expiry;
    const Nanos left = deadline.remaining(clock);
    if (left <= Nanos::zero()) break;
    clock.sleep_for(delay < left ? delay : left);
    // Same wanted depth on retries: a grant whose reply was lost is found.
    s = attempt(io_deadline().min(op_deadline));
  }
  return s;
}

Status ReentrantLock::release() {
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kRelease, t0, send_release());
}

Status ReentrantLock::send_release() {
  if (depth_ == 0 && most_ == 0) return ErrorCode::kNotHeld;
  // After an acquire whose outcome we never learnt the level may be there
  // even at depth 0: release() removes it too.
  const uint32_t want = depth_ > 0 ? depth_ - 1 : 0;
  const detail::DecimalText want_text(want);
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText most(most_);
  const Bytes keys[1] = {key()};
  const Bytes args[5] = {owner(), want_text.bytes(), ttl.bytes(), handle(), most.bytes()};
  const TimePoint start = conn_->clock().now();
  const Result<const Reply*> r = conn_->eval({&detail::kReentrantReleaseScript, keys, args}, io_deadline());
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (detail::may_have_run(s.code())) {
      // The level may be gone: stop counting it (at depth 0 nothing is
      // claimed), but remember it may be there so release() can retry.
      depth_ = want;
      unknown_outcome(most_, start, options_.ttl);
    }
    return s;
  }
  const int64_t d = r.value()->integer;
  if (d < 0 || d != static_cast<int64_t>(want)) {
    forget();
    return ErrorCode::kNotOwner;
  }
  depth_ = most_ = want;
  if (depth_ == 0) {
    forget();
    return Status();
  }
  valid_until_ = detail::lease_end(start, options_.ttl, options_.drift_factor);
  // The level is released; the others are held but their refreshed TTL
  // came back too late to claim.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

Status ReentrantLock::extend(Millis ttl) {
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kExtend, t0, send_extend(ttl));
}

Status ReentrantLock::send_extend(Millis ttl) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (depth_ == 0) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {owner(), ms_text.bytes(), handle()};
  const TimePoint start = conn_->clock().now();
  // A renewal is worth waiting for only while the lease is still valid.
  const Deadline deadline = detail::capped_at(io_deadline(), valid_until_, start);
  const Result<const Reply*> r = conn_->eval({&detail::kReentrantExtendScript, keys, args}, deadline);
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (detail::may_have_run(s.code())) unknown_outcome(depth_, start, ttl);
    const bool lapsed = remaining() <= Nanos::zero() && s.code() == ErrorCode::kTimeout;
    return lapsed ? Status(ErrorCode::kExpired) : s;
  }
  if (r.value()->integer <= 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  valid_until_ = detail::lease_end(start, ttl, options_.drift_factor);
  // Extended, but for less than the drift allowance: not usable.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

}  // namespace edgelock
