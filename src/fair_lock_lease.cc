// FairLock: what a held lease does (release, extend, ownership, status,
// adopt). Extend and the ownership check are Lock's scripts (the key alone);
// release is the fair one, which wakes the head of the queue.
#include <cstring>

#include "edgelock/fair_lock.h"
#include "fair_scripts.h"
#include "lock_keys.h"
#include "lock_scripts.h"

namespace edgelock {

Status FairLock::release() {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kRelease, t0, send_release());
}

Status FairLock::send_release() {
  if (!has_token_) return ErrorCode::kNotHeld;
  // Whatever the outcome, the lease is no longer ours to use: the delete
  // may run even if its reply never comes. The token stays for a retry.
  granted_ = false;
  retired_ = true;  // the delete may land whenever: nothing is claimed under this token again
  valid_until_ = TimePoint();
  // The waiter our grant named as next: the release wakes it (0: none
  // known; the script then names the head, if any).
  const WakeSuffix next(next_seq_);
  const Bytes companions[2] = {detail::kQueueSuffix, next.bytes()};
  const detail::DecimalText next_text(static_cast<int64_t>(next_seq_));
  const detail::DecimalText join(options_.waiter_timeout);
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {token(), next_text.bytes(), join.bytes()};
  const Result<const Reply*> r =
      eval({&detail::kFairReleaseScript, keys, args, false, companions}, core_.io_deadline());
  if (!r.ok()) return r.status();
  // Only the script's 1, 0 or -seq is an answer; anything else keeps the
  // token so the caller can try again.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer > 1)
    return core_.reject("release wants 1, 0 or -seq");
  forget();
  if (rep->integer == 0) return ErrorCode::kNotOwner;
  // Deleted, but the head is another waiter than the one named: wake it.
  if (rep->integer < 0) wake(-rep->integer);
  return Status();
}

Status FairLock::send_extend(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_ || retired_) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {token(), ms_text.bytes(),
                         Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set")};
  const TimePoint start = clock().now();
  // A renewal never waits past the lease it renews: at its end the caller
  // must learn of the loss.
  const Deadline d = core_.renewal_deadline(granted_ ? valid_until_ : TimePoint(), start);
  const Result<const Reply*> r =
      core_.backend().eval({&detail::kExtendScript, keys, args, true}, d);
  // The new TTL may or may not have been applied (timeout, lost reply,
  // WAIT short of its replicas): the lease lasts until the earlier end.
  if (!r.ok()) {
    if (granted_) valid_until_ = core_.least_end(valid_until_, start, ttl);
    return r.status();
  }
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || Millis(rep->integer) > 2 * kMaxTtl) {
    if (granted_) valid_until_ = core_.least_end(valid_until_, start, ttl);
    return core_.reject("extend wants a TTL or 0");
  }
  if (rep->integer == 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  granted_ = true;
  valid_until_ = core_.validity_end(start, Millis(rep->integer));
  // ok means usable: a TTL the round trip and drift eat is not (token kept).
  if (remaining() <= Nanos::zero()) return ErrorCode::kExpired;
  return Status();
}

Status FairLock::extend(Millis ttl, ExtendMode mode) {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kExtend, t0, send_extend(ttl, mode));
}

Status FairLock::renew() { return extend(options_.ttl, ExtendMode::kReplace); }

Result<bool> FairLock::owned() {
  if (!has_token_) return ErrorCode::kNotHeld;
  const Bytes keys[1] = {key()};
  const Bytes args[1] = {token()};
  const Result<const Reply*> r =
      core_.backend().eval({&detail::kOwnedScript, keys, args}, core_.io_deadline());
  if (!r.ok()) return r.status();
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || (rep->integer < -1 && rep->integer != -3)) {
    return core_.reject("owned wants a PTTL or -3");
  }
  if (rep->integer == -3) {
    forget();
    core_.noted(EventKind::kCheck, clock().now(), ErrorCode::kNotOwner).ignore();
    return false;
  }
  return true;
}

Result<KeyStatus> FairLock::status() {
  const Bytes args[2] = {Bytes::from_cstr("PTTL"), key()};
  const Result<const Reply*> r = core_.backend().command(key(), args, core_.io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger || r.value()->integer < -2) {
    return core_.reject("PTTL wants an integer >= -2");
  }
  KeyStatus ks;
  ks.held = r.value()->integer != -2;
  ks.expires = r.value()->integer >= 0;
  ks.ttl = Millis(ks.expires ? r.value()->integer : 0);
  return ks;
}

Status FairLock::adopt(Bytes token) {
  if (token.size == 0 || token.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  forget();
  std::memcpy(token_, token.data, token.size);
  token_len_ = token.size;
  has_token_ = true;
  return Status();
}

}  // namespace edgelock
