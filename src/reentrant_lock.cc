// Reentrant lock: one script call per operation, depth kept on the server.
#include "edgelock/reentrant_lock.h"

#include <cstring>

#include "edgelock/detail/decimal_text.h"
#include "lease_util.h"
#include "reentrant_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kOwnerLen = 32;  // 128 random bits as hex
constexpr uint32_t kMaxDepth = 1u << 31;
}  // namespace

Status ReentrantLock::init(Bytes key, const ReentrantLockOptions& options, Bytes owner) {
  if (owner.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key, {options.ttl, options.drift_factor, options.retry_min, options.retry_max},
                          &fence_key_));
  EDGELOCK_TRY(core_.mint(handle_, sizeof handle_));
  if (owner.size == 0) {
    EDGELOCK_TRY(core_.mint(owner_, kOwnerLen));
    owner_len_ = kOwnerLen;
  } else {
    std::memcpy(owner_, owner.data, owner.size);
    owner_len_ = owner.size;
  }
  options_ = options;
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

Nanos ReentrantLock::remaining() const {
  return depth_ > 0 ? core_.left(valid_until_) : Nanos::zero();
}

uint32_t ReentrantLock::depth() const { return remaining() > Nanos::zero() ? depth_ : 0; }

// KEYS[1] = the hash; with `fenced` (acquire) KEYS[2] = the fence counter.
Result<const Reply*> ReentrantLock::eval(const Script& script, bool fenced, Span<const Bytes> args,
                                         bool writes, Deadline deadline) {
  const Bytes keys[2] = {key(), fence_key_.bytes()};
  return core_.backend().eval({&script, {keys, fenced ? 2u : 1u}, args, writes}, deadline);
}

Status ReentrantLock::attempt(Deadline deadline) {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kAcquire, t0, send_acquire(deadline));
}

Status ReentrantLock::send_acquire(Deadline deadline) {
  const uint32_t want = depth_ + 1;
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText want_text(want);
  const detail::DecimalText most(most_ > want ? most_ : want);
  const Bytes args[5] = {owner(), ttl.bytes(), want_text.bytes(), handle(), most.bytes()};
  const TimePoint start = clock().now();
  const Result<const Reply*> r = eval(detail::kReentrantAcquireScript, true, args, true, deadline);
  int64_t code = 0, value = 0;
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && (!detail::int_at(r.value(), 0, &code) || !detail::int_at(r.value(), 1, &value))) {
    s = ErrorCode::kProtocol;
  }
  if (!s.ok()) {
    // The level may have landed (and re-armed the TTL, maybe shorter):
    // count it for release(), claim the least validity.
    if (traits(s.code()).may_have_run) unknown_outcome(want, start, options_.ttl);
    return s;
  }
  if (code == 0) {
    most_ = depth_;  // someone else holds it: no level of ours is there
    core_.set_busy_ttl(Millis(value));
    return ErrorCode::kBusy;
  }
  if (code < 0 || code != static_cast<int64_t>(want)) {
    forget();  // expired or changed under us: no level is ours any more
    return ErrorCode::kNotOwner;
  }
  depth_ = most_ = want;
  fence_ = static_cast<uint64_t>(value);
  valid_until_ = core_.validity_end(start, options_.ttl);
  if (remaining() <= Nanos::zero()) {
    release().ignore();  // this level came too late to use: hand it back
    return ErrorCode::kExpired;
  }
  return Status();
}

void ReentrantLock::unknown_outcome(uint32_t most, TimePoint start, Millis ttl) {
  maybe_holds(most);
  valid_until_ = core_.least_end(valid_until_, start, ttl);
}

Status ReentrantLock::try_acquire() {
  if (!core_.ready() || depth_ >= kMaxDepth) return ErrorCode::kInvalidArgument;
  return attempt(core_.io_deadline());
}

Status ReentrantLock::acquire(Nanos wait) {
  if (!core_.ready() || depth_ >= kMaxDepth) return ErrorCode::kInvalidArgument;
  const Deadline deadline = core_.wait_deadline(wait);
  const auto step = [](void* self, Status last, Nanos left, Deadline op) {
    ReentrantLock* l = static_cast<ReentrantLock*>(self);
    l->clock().sleep_for(l->core_.backoff_delay(last, left));
    // Same wanted depth on retries: a grant whose reply was lost is found.
    return l->attempt(l->core_.io_deadline().min(op));
  };
  return core_.retry(try_acquire(), deadline, detail::RetryOn::kTransient, step, this);
}

Status ReentrantLock::release() {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kRelease, t0, send_release());
}

Status ReentrantLock::send_release() {
  if (depth_ == 0 && most_ == 0) return ErrorCode::kNotHeld;
  // After an acquire whose outcome we never learnt the level may be there
  // even at depth 0: release() removes it too.
  const uint32_t want = depth_ > 0 ? depth_ - 1 : 0;
  const detail::DecimalText want_text(want);
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText most(most_);
  const Bytes args[5] = {owner(), want_text.bytes(), ttl.bytes(), handle(), most.bytes()};
  const TimePoint start = clock().now();
  const Result<const Reply*> r =
      eval(detail::kReentrantReleaseScript, false, args, false, core_.io_deadline());
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (traits(s.code()).may_have_run) {
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
  valid_until_ = core_.validity_end(start, options_.ttl);
  // The level is released; the others are held but their refreshed TTL
  // came back too late to claim.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

Status ReentrantLock::extend(Millis ttl) {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kExtend, t0, send_extend(ttl));
}

Status ReentrantLock::send_extend(Millis ttl) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (depth_ == 0) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes args[3] = {owner(), ms_text.bytes(), handle()};
  const TimePoint start = clock().now();
  // A renewal is worth waiting for only while the lease is still valid.
  const Deadline deadline = core_.renewal_deadline(valid_until_, start);
  const Result<const Reply*> r = eval(detail::kReentrantExtendScript, false, args, true, deadline);
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (traits(s.code()).may_have_run) unknown_outcome(depth_, start, ttl);
    const bool lapsed = remaining() <= Nanos::zero() && s.code() == ErrorCode::kTimeout;
    return lapsed ? Status(ErrorCode::kExpired) : s;
  }
  if (r.value()->integer <= 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  valid_until_ = core_.validity_end(start, ttl);
  // Extended, but for less than the drift allowance: not usable.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

}  // namespace edgelock
