// Counting semaphore with expiring permits: one script call per operation.
#include "edgelock/semaphore.h"

#include "edgelock/detail/decimal_text.h"
#include "lease_util.h"
#include "semaphore_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kPermitIdLen = 32;  // 128 random bits as hex
}  // namespace

// --- Permit: the lease a caller holds; the work is the semaphore's.

Status Permit::extend(Millis ttl) { return sem_ ? sem_->extend(this, ttl) : Status(ErrorCode::kNotHeld); }

Status Permit::renew() { return sem_ ? extend(sem_->options().ttl) : Status(ErrorCode::kNotHeld); }

Status Permit::release() { return sem_ ? sem_->release(this) : Status(ErrorCode::kNotHeld); }

Nanos Permit::remaining() const {
  return sem_ && granted_ ? sem_->core_.left(valid_until_) : Nanos::zero();
}

Bytes Permit::key() const { return sem_ ? sem_->key() : Bytes(); }

Nanos Permit::renew_budget() const { return sem_ ? sem_->core_.command_timeout() : Nanos::zero(); }

const char* Permit::last_error() const { return sem_ ? sem_->last_error() : ""; }

Clock& Permit::clock() const { return sem_ ? sem_->core_.clock() : default_clock(); }

// --- Semaphore.

Status Semaphore::init(Bytes key, const SemaphoreOptions& options) {
  if (options.permits < 1 || options.permits > kMaxPermits) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key, {options.ttl, options.drift_factor, options.retry_min, options.retry_max}));
  options_ = options;
  return Status();
}

Result<const Reply*> Semaphore::eval(const Script& script, Span<const Bytes> args, bool writes,
                                     Deadline deadline) {
  const Bytes keys[1] = {key()};
  return core_.backend().eval({&script, keys, args, writes}, deadline);
}

Status Semaphore::attempt(Permit* permit, Deadline deadline) {
  const TimePoint t0 = core_.clock().now();
  return core_.noted(EventKind::kAcquire, t0, send_acquire(permit, deadline));
}

Status Semaphore::send_acquire(Permit* permit, Deadline deadline) {
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText n(options_.permits);
  const Bytes args[3] = {permit->id(), ttl.bytes(), n.bytes()};
  const TimePoint start = core_.clock().now();
  const Result<const Reply*> r = eval(detail::kSemAcquireScript, args, true, deadline);
  // Failed: the grant may still have landed. The permit keeps its id, so a
  // retry re-arms it and release() removes it. Granted on the primary but
  // not confirmed by its replicas: hand it back.
  if (!r.ok()) {
    if (r.status().code() == ErrorCode::kNoQuorum) send_release(permit->id()).ignore();
    return r.status();
  }
  int64_t granted = 0, value = 0;
  if (!detail::int_at(r.value(), 0, &granted) || !detail::int_at(r.value(), 1, &value)) {
    return ErrorCode::kProtocol;
  }
  if (granted < 0) return ErrorCode::kInvalidArgument;  // the script refused an empty id
  if (granted != 1) {
    core_.set_busy_ttl(Millis(value > 0 ? value : 0));
    return ErrorCode::kBusy;
  }
  permit->granted_ = true;
  permit->valid_until_ = core_.validity_end(start, options_.ttl);
  if (permit->remaining() <= Nanos::zero()) {
    // Granted too late to use: hand it back, but keep the id. Wiping it
    // would make the retry ask for the permit "" (shared by every client
    // doing the same) and lose the permit if the hand-back failed.
    permit->unclaim();
    release_id(permit->id()).ignore();
    return ErrorCode::kExpired;
  }
  return Status();
}

Status Semaphore::try_acquire(Permit* permit) {
  if (!core_.ready() || !permit) return ErrorCode::kInvalidArgument;
  *permit = Permit();
  permit->sem_ = this;
  EDGELOCK_TRY(core_.mint(permit->id_, kPermitIdLen));
  permit->id_len_ = kPermitIdLen;
  return attempt(permit, core_.io_deadline());
}

Status Semaphore::acquire(Permit* permit, Nanos wait) {
  const Deadline deadline = core_.wait_deadline(wait);
  const auto step = [](void* self, Status last, Nanos left, Deadline op) {
    Permit* p = static_cast<Permit*>(self);
    Semaphore* sem = p->sem_;
    sem->core_.clock().sleep_for(sem->core_.backoff_delay(last, left));
    return sem->attempt(p, sem->core_.io_deadline().min(op));  // same id: lost grants are found
  };
  // A null permit or a semaphore not set up fails at once (not retryable).
  return core_.retry(try_acquire(permit), deadline, detail::RetryOn::kTransient, step, permit);
}

Status Semaphore::release(Permit* permit) {
  const Status s = release_id(permit->id());
  // Released, or not ours any more: either way this permit is done.
  if (s.ok() || s.code() == ErrorCode::kNotOwner) {
    permit->clear();
  } else if (traits(s.code()).may_have_run) {
    permit->unclaim();  // it may be gone: stop claiming it, keep the id to retry
  }
  return s;
}

Status Semaphore::release_id(Bytes id) {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  const TimePoint t0 = core_.clock().now();
  return core_.noted(EventKind::kRelease, t0, send_release(id));
}

Status Semaphore::send_release(Bytes id) {
  if (id.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  if (id.size == 0) return ErrorCode::kNotHeld;
  const Bytes args[1] = {id};
  const Result<const Reply*> r = eval(detail::kSemReleaseScript, args, false, core_.io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger) return ErrorCode::kProtocol;
  return r.value()->integer == 1 ? Status() : Status(ErrorCode::kNotOwner);
}

Status Semaphore::extend(Permit* permit, Millis ttl) {
  const TimePoint t0 = core_.clock().now();
  return core_.noted(EventKind::kExtend, t0, send_extend(permit, ttl));
}

Status Semaphore::send_extend(Permit* permit, Millis ttl) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (permit->id_len_ == 0) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes args[2] = {permit->id(), ms_text.bytes()};
  const TimePoint start = core_.clock().now();
  // A renewal is worth waiting for only while the permit is still valid.
  const Deadline deadline =
      core_.renewal_deadline(permit->granted_ ? permit->valid_until_ : TimePoint(), start);
  const Result<const Reply*> r = eval(detail::kSemExtendScript, args, true, deadline);
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    // Unknown outcome: the server may now hold the permit for `ttl` from
    // when it ran, which may be less than before.
    if (traits(s.code()).may_have_run) {
      permit->valid_until_ = core_.least_end(permit->valid_until_, start, ttl);
    }
    if (permit->remaining() > Nanos::zero()) return s;
    permit->unclaim();
    return s.code() == ErrorCode::kTimeout ? Status(ErrorCode::kExpired) : s;
  }
  if (r.value()->integer <= 0) {
    permit->clear();
    return ErrorCode::kNotOwner;
  }
  permit->granted_ = true;
  permit->valid_until_ = core_.validity_end(start, ttl);
  if (permit->remaining() > Nanos::zero()) return Status();
  permit->unclaim();  // extended, but for less than the drift allowance
  return ErrorCode::kExpired;
}

Result<uint32_t> Semaphore::in_use() {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  const Result<const Reply*> r = eval(detail::kSemCountScript, {}, false, core_.io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger || r.value()->integer < 0) return ErrorCode::kProtocol;
  return static_cast<uint32_t>(r.value()->integer);
}

}  // namespace edgelock
