// Single-instance lock: one script call per operation.
#include "edgelock/lock.h"

#include <cstring>

#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/decimal_text.h"
#include "lock_scripts.h"

namespace edgelock {

namespace {

constexpr size_t kTokenLen = 32;  // 128 random bits as hex
// How long an unclaimed wake signal lives: long enough to cover a waiter
// that got its busy reply but has not reached BLPOP yet, short enough that
// a stale signal costs at most one extra attempt.
constexpr const char* kWakeSignalTtlMs = "250";

}  // namespace

Status Lock::init(Bytes key, const LockOptions& options) {
  if (options.wake_fallback < Millis(2)) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key, {options.ttl, options.drift_factor, options.retry_min, options.retry_max},
                          &fence_key_, &wake_key_));
  wake_supported_ = true;
  ttl_text_.set(options.ttl.count());
  options_ = options;
  forget();
  return Status();
}

void Lock::forget() {
  has_token_ = false;
  granted_ = false;
  valid_until_ = TimePoint();
  fence_ = 0;
}

Nanos Lock::remaining() const { return granted_ ? core_.left(valid_until_) : Nanos::zero(); }

// One counted attempt; with `blpop`, pipelined behind that command on the
// plain connection (lock_wait.cc).
Status Lock::attempt(Deadline deadline, Span<const Bytes> blpop) {
  const Bytes keys[3] = {key(), fence_key_.bytes(), wake_key_.bytes()};
  const Bytes args[2] = {token(), ttl_text_.bytes()};
  const size_t nkeys = options_.wake_on_release ? 3 : 2;
  // From here a lost reply may mean the key is ours (also on a retry after
  // a late grant was handed back): keep the token so release() can clean up.
  has_token_ = true;
  // Validity counts from before the request leaves (before the BLPOP, if
  // any): the server's TTL may have started any time after this.
  const TimePoint start = clock().now();
  const ScriptCall call{&detail::kAcquireScript, {keys, nkeys}, args, true};
  Status first;
  const Result<const Reply*> r =
      blpop.empty() ? core_.backend().eval(call, deadline)
                    : detail::io(*core_.backend().direct())
                          .command_then_eval(blpop, call, deadline, &first);
  // Redis < 6 refuses BLPOP's fractional timeout: stop waiting on signals.
  if (first.code() == ErrorCode::kServerError) wake_supported_ = false;
  return core_.noted(EventKind::kAcquire, start, on_acquire_reply(r, start));
}

Status Lock::on_acquire_reply(const Result<const Reply*>& r, TimePoint start) {
  if (!r.ok()) {
    // Granted on the primary but not confirmed by its replicas: a failover
    // could lose it, so hand it back rather than report a grant.
    if (r.status().code() == ErrorCode::kNoQuorum) release().ignore();
    return r.status();
  }
  const Reply* rep = r.value();
  // Fail closed: only an integer fence (> 0) is a grant.
  if (rep->type != ReplyType::kInteger) return core_.reject("acquire wants an integer");
  if (rep->integer <= 0) {
    core_.set_busy_ttl(Millis(-rep->integer));
    return ErrorCode::kBusy;
  }
  has_token_ = true;
  granted_ = true;
  fence_ = static_cast<uint64_t>(rep->integer);
  valid_until_ = core_.validity_end(start, options_.ttl);
  if (remaining() <= Nanos::zero()) {
    release().ignore();  // too late to use: hand it back at once
    return ErrorCode::kExpired;
  }
  return Status();
}

Status Lock::try_acquire() {
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  forget();
  EDGELOCK_TRY(core_.mint(token_, kTokenLen));
  token_len_ = kTokenLen;
  return attempt(core_.io_deadline());
}

Status Lock::acquire(Nanos wait) {
  const Deadline deadline = core_.wait_deadline(wait);
  const auto step = [](void* self, Status last, Nanos left, Deadline op) {
    return static_cast<Lock*>(self)->next_attempt(last, left, op);
  };
  return core_.retry(try_acquire(), deadline, detail::RetryOn::kTransient, step, this);
}

Status Lock::next_attempt(Status last, Nanos left, Deadline op_deadline) {
  // Wake signal, holder's TTL or backoff; with the signal, the attempt may
  // ride along (pipelined behind the BLPOP).
  Status next;
  if (pause(last, left, op_deadline, &next)) return next;
  // Same token on retries: the script recognises a grant whose reply we lost.
  return attempt(core_.io_deadline().min(op_deadline));
}

Status Lock::release() {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kRelease, t0, send_release());
}

Status Lock::send_release() {
  if (!has_token_) return ErrorCode::kNotHeld;
  // Whatever the outcome, the lease is no longer ours to use: the delete
  // may run even if its reply never comes. The token stays for a retry.
  granted_ = false;
  valid_until_ = TimePoint();
  const Bytes keys[2] = {key(), wake_key_.bytes()};
  const Bytes args[2] = {token(), Bytes::from_cstr(kWakeSignalTtlMs)};
  const size_t n = options_.wake_on_release ? 2 : 1;
  const Result<const Reply*> r =
      core_.backend().eval({&detail::kReleaseScript, {keys, n}, {args, n}}, core_.io_deadline());
  if (!r.ok()) return r.status();
  // Only the script's 1 or 0 is an answer; anything else keeps the token
  // so the caller can try again.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || rep->integer > 1) {
    return core_.reject("release wants 0 or 1");
  }
  forget();
  return rep->integer == 1 ? Status() : Status(ErrorCode::kNotOwner);
}

Status Lock::send_extend(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_) return ErrorCode::kNotHeld;
  const detail::DecimalText ms_text(ttl);
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {token(), ms_text.bytes(),
                         Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set")};
  const TimePoint start = clock().now();
  // A renewal never waits past the lease it renews: at its end the caller
  // must learn of the loss (e.g. to stop the work it guards).
  const Deadline d = core_.renewal_deadline(granted_ ? valid_until_ : TimePoint(), start);
  const Result<const Reply*> r = core_.backend().eval({&detail::kExtendScript, keys, args, true}, d);
  if (!r.ok()) return after_unknown_extend(start, ttl, r.status());
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || Millis(rep->integer) > 2 * kMaxTtl) {
    return after_unknown_extend(start, ttl, core_.reject("extend wants a TTL or 0"));
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

Status Lock::after_unknown_extend(TimePoint start, Millis ttl, Status s) {
  // The new TTL may have been applied (timeout, lost reply, WAIT short of
  // its replicas), or not: the lease lasts until the earlier of the two.
  if (granted_) valid_until_ = core_.least_end(valid_until_, start, ttl);
  return s;
}

Status Lock::extend(Millis ttl, ExtendMode mode) {
  const TimePoint t0 = clock().now();
  return core_.noted(EventKind::kExtend, t0, send_extend(ttl, mode));
}

Status Lock::renew() { return extend(options_.ttl, ExtendMode::kReplace); }

Result<bool> Lock::owned() {
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

Result<KeyStatus> Lock::status() {
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

Status Lock::adopt(Bytes token) {
  if (token.size == 0 || token.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  forget();
  std::memcpy(token_, token.data, token.size);
  token_len_ = token.size;
  has_token_ = true;
  return Status();
}

}  // namespace edgelock
