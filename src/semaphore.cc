// Counting semaphore with expiring permits: one script call per operation.
#include "edgelock/semaphore.h"

#include <cstring>

#include "lease_util.h"
#include "metrics_note.h"
#include "semaphore_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kPermitRandomBytes = 16;  // 128 bits -> 32 hex chars
}  // namespace

Status Semaphore::init(Bytes key, const SemaphoreOptions& options) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (options.permits < 1 || options.permits > kMaxPermits) return ErrorCode::kInvalidArgument;
  if (options.ttl < Millis(1) || options.ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!(options.drift_factor >= 0.0 && options.drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  if (options.retry_min <= Nanos::zero() || options.retry_max < options.retry_min) {
    return ErrorCode::kInvalidArgument;
  }
  EDGELOCK_TRY(rng_.seed_from_os());
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  options_ = options;
  backoff_ = Backoff(options.retry_min, options.retry_max);
  return Status();
}

Deadline Semaphore::io_deadline() const {
  return Deadline::after(conn_->clock(), conn_->options().command_timeout);
}

Nanos Semaphore::remaining(const Permit& permit) const {
  if (!permit.granted) return Nanos::zero();
  const Nanos left = permit.valid_until - conn_->clock().now();
  return left > Nanos::zero() ? left : Nanos::zero();
}

Status Semaphore::noted(EventKind kind, TimePoint start, Status s) {
  detail::note(*conn_, metrics_, kind, s, key(), conn_->clock().now() - start);
  return s;
}

Status Semaphore::attempt(Permit* permit, Deadline deadline) {
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kAcquire, t0, send_acquire(permit, deadline));
}

Status Semaphore::send_acquire(Permit* permit, Deadline deadline) {
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText n(options_.permits);
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {permit->id_bytes(), ttl.bytes(), n.bytes()};
  const TimePoint start = conn_->clock().now();
  const Result<const Reply*> r = conn_->eval({&detail::kSemAcquireScript, keys, args}, deadline);
  // Failed: the grant may still have landed. The permit keeps its id, so a
  // retry re-arms it and release() removes it.
  if (!r.ok()) return r.status();
  int64_t granted = 0, value = 0;
  if (!detail::int_at(r.value(), 0, &granted) || !detail::int_at(r.value(), 1, &value)) {
    return ErrorCode::kProtocol;
  }
  if (granted < 0) return ErrorCode::kInvalidArgument;  // the script refused an empty id
  if (granted != 1) {
    busy_wait_ = Millis(value > 0 ? value : 0);
    return ErrorCode::kBusy;
  }
  permit->granted = true;
  permit->valid_until = detail::lease_end(start, options_.ttl, options_.drift_factor);
  if (remaining(*permit) <= Nanos::zero()) {
    // Granted too late to use: hand it back, but keep the id. Wiping it
    // would make the retry ask for the permit "" (shared by every client
    // doing the same) and lose the permit if the hand-back failed.
    unclaim(permit);
    release_id(permit->id_bytes()).ignore();
    return ErrorCode::kExpired;
  }
  return Status();
}

void Semaphore::unclaim(Permit* permit) {
  permit->granted = false;
  permit->valid_until = TimePoint();
}

Status Semaphore::try_acquire(Permit* permit) {
  if (key_len_ == 0 || !permit) return ErrorCode::kInvalidArgument;
  *permit = Permit();
  EDGELOCK_TRY(random_hex(permit->id, kPermitRandomBytes));
  permit->id_len = 2 * kPermitRandomBytes;
  return attempt(permit, io_deadline());
}

Status Semaphore::acquire(Permit* permit, Nanos wait) {
  Clock& clock = conn_->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  const Deadline op_deadline =
      deadline.is_never() ? deadline : Deadline::at(deadline.when() + conn_->options().command_timeout);
  Status s = try_acquire(permit);
  backoff_.reset();
  for (uint32_t i = 0; !s.ok() && detail::retryable(s.code()) && i < 1000000; ++i) {
    Nanos delay = backoff_.next(rng_);
    // A permit frees by expiry at the latest: no point sleeping past it.
    const Nanos expiry = busy_wait_ + Millis(1);
    if (s.code() == ErrorCode::kBusy && expiry < delay) delay = expiry;
    const Nanos left = deadline.remaining(clock);
    if (left <= Nanos::zero()) break;
    clock.sleep_for(delay < left ? delay : left);
    s = attempt(permit, io_deadline().min(op_deadline));  // same id: lost grants are found
  }
  return s;
}

Status Semaphore::release(Permit* permit) {
  if (!permit) return ErrorCode::kInvalidArgument;
  const Status s = release_id(permit->id_bytes());
  // Released, or not ours any more: either way this permit is done.
  if (s.ok() || s.code() == ErrorCode::kNotOwner) {
    *permit = Permit();
  } else if (detail::may_have_run(s.code())) {
    unclaim(permit);  // it may be gone: stop claiming it, keep the id to retry
  }
  return s;
}

Status Semaphore::release_id(Bytes id) {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kRelease, t0, send_release(id));
}

Status Semaphore::send_release(Bytes id) {
  if (id.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  if (id.size == 0) return ErrorCode::kNotHeld;
  const Bytes keys[1] = {key()};
  const Bytes args[1] = {id};
  const Result<const Reply*> r = conn_->eval({&detail::kSemReleaseScript, keys, args}, io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger) return ErrorCode::kProtocol;
  return r.value()->integer == 1 ? Status() : Status(ErrorCode::kNotOwner);
}

Status Semaphore::extend(Permit* permit, Millis ttl) {
  const TimePoint t0 = conn_->clock().now();
  return noted(EventKind::kExtend, t0, send_extend(permit, ttl));
}

Status Semaphore::send_extend(Permit* permit, Millis ttl) {
  if (!permit || ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (permit->id_len == 0) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes keys[1] = {key()};
  const Bytes args[2] = {permit->id_bytes(), ms_text.bytes()};
  const TimePoint start = conn_->clock().now();
  // A renewal is worth waiting for only while the permit is still valid.
  const Deadline deadline =
      detail::capped_at(io_deadline(), permit->granted ? permit->valid_until : TimePoint(), start);
  const Result<const Reply*> r = conn_->eval({&detail::kSemExtendScript, keys, args}, deadline);
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    // Unknown outcome: the server may now hold the permit for `ttl` from
    // when it ran, which may be less than before.
    if (detail::may_have_run(s.code())) {
      permit->valid_until = detail::least_end(permit->valid_until, start, ttl, options_.drift_factor);
    }
    if (remaining(*permit) > Nanos::zero()) return s;
    unclaim(permit);
    return s.code() == ErrorCode::kTimeout ? Status(ErrorCode::kExpired) : s;
  }
  if (r.value()->integer <= 0) {
    *permit = Permit();
    return ErrorCode::kNotOwner;
  }
  permit->granted = true;
  permit->valid_until = detail::lease_end(start, ttl, options_.drift_factor);
  if (remaining(*permit) > Nanos::zero()) return Status();
  unclaim(permit);  // extended, but for less than the drift allowance
  return ErrorCode::kExpired;
}

Result<uint32_t> Semaphore::in_use() {
  if (key_len_ == 0) return ErrorCode::kInvalidArgument;
  const Bytes keys[1] = {key()};
  const Result<const Reply*> r = conn_->eval({&detail::kSemCountScript, keys, {}}, io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger || r.value()->integer < 0) return ErrorCode::kProtocol;
  return static_cast<uint32_t>(r.value()->integer);
}

}  // namespace edgelock
