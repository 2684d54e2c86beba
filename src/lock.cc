// Single-instance lock: one script call per operation.
#include "edgelock/lock.h"

#include <cstdio>
#include <cstring>

#include "edgelock/detail/connection_io.h"
#include "lease_util.h"
#include "lock_keys.h"
#include "lock_scripts.h"
#include "metrics_note.h"

namespace edgelock {

namespace {

constexpr size_t kTokenRandomBytes = 16;  // 128 bits -> 32 hex chars
// How long an unclaimed wake signal lives: long enough to cover a waiter
// that got its busy reply but has not reached BLPOP yet, short enough that
// a stale signal costs at most one extra attempt.
constexpr const char* kWakeSignalTtlMs = "250";

}  // namespace

Status Lock::init(Bytes key, const LockOptions& options) {
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (options.ttl < Millis(1) || options.ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!(options.drift_factor >= 0.0 && options.drift_factor <= 0.5)) return ErrorCode::kInvalidArgument;
  if (options.retry_min <= Nanos::zero() || options.retry_max < options.retry_min) {
    return ErrorCode::kInvalidArgument;
  }
  if (options.wake_fallback < Millis(2)) return ErrorCode::kInvalidArgument;
  if (backend_) EDGELOCK_TRY(backend_->check_key(key));
  const Result<size_t> fk = detail::companion_key(key, ":fence", fence_key_, sizeof fence_key_);
  if (!fk.ok()) return fk.status();
  const Result<size_t> wk = detail::companion_key(key, ":wake", wake_key_, sizeof wake_key_);
  if (!wk.ok()) return wk.status();
  EDGELOCK_TRY(rng_.seed_from_os());
  std::memcpy(key_, key.data, key.size);
  key_len_ = key.size;
  fence_key_len_ = fk.value();
  wake_key_len_ = wk.value();
  wake_supported_ = true;
  options_ = options;
  ttl_text_len_ = static_cast<size_t>(
      std::snprintf(ttl_text_, sizeof ttl_text_, "%lld", detail::ms_arg(options.ttl)));
  backoff_ = Backoff(options.retry_min, options.retry_max);
  forget();
  return Status();
}

void Lock::forget() {
  has_token_ = false;
  granted_ = false;
  valid_until_ = TimePoint();
  fence_ = 0;
}

Deadline Lock::io_deadline() const {
  return Deadline::after(clock(), command_timeout());
}

Result<const Reply*> Lock::run_eval(const ScriptCall& call, Deadline d) {
  if (backend_) return backend_->eval(call, d);
  return conn_->eval(call, d);
}

Result<const Reply*> Lock::run_command(Span<const Bytes> args, Deadline d) {
  if (backend_) return backend_->command(key(), args, d);
  return conn_->command(args, d);
}


Nanos Lock::remaining() const {
  if (!granted_) return Nanos::zero();
  const Nanos left = valid_until_ - clock().now();
  return left > Nanos::zero() ? left : Nanos::zero();
}

Status Lock::noted(EventKind kind, TimePoint start, Status s) {
  // Through connection(): the connection serving the key, however reached.
  Connection& c = connection();
  detail::note(c, metrics_, kind, s, key(), c.clock().now() - start);
  return s;
}

Status Lock::counted_attempt(Deadline deadline) {
  const TimePoint t0 = connection().clock().now();
  return noted(EventKind::kAcquire, t0, attempt(deadline));
}

Status Lock::attempt(Deadline deadline) {
  const Bytes keys[3] = {key(), Bytes(fence_key_, fence_key_len_), Bytes(wake_key_, wake_key_len_)};
  const Bytes args[2] = {token(), Bytes(ttl_text_, ttl_text_len_)};
  const size_t nkeys = options_.wake_on_release ? 3 : 2;
  // From here a lost reply may mean the key is ours (also on a retry after
  // a late grant was handed back): keep the token so release() can clean up.
  has_token_ = true;
  // Validity counts from before the request leaves: the server's TTL may
  // have started any time after this.
  const TimePoint start = clock().now();
  const ScriptCall call{&detail::kAcquireScript, {keys, nkeys}, args, true};
  return on_acquire_reply(run_eval(call, deadline), start);
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
  if (rep->type != ReplyType::kInteger) return detail::io(connection()).reject_reply("acquire wants an integer");
  if (rep->integer <= 0) {
    busy_ttl_ = Millis(-rep->integer);
    return ErrorCode::kBusy;
  }
  has_token_ = true;
  granted_ = true;
  fence_ = static_cast<uint64_t>(rep->integer);
  valid_until_ = detail::validity_end(start, options_.ttl, options_.drift_factor);
  if (!held()) {
    release().ignore();  // too late to use: hand it back at once
    return ErrorCode::kExpired;
  }
  return Status();
}

Status Lock::try_acquire() {
  if (key_len_ == 0 || held()) return ErrorCode::kInvalidArgument;
  forget();
  EDGELOCK_TRY(random_hex(token_, kTokenRandomBytes));
  token_len_ = 2 * kTokenRandomBytes;
  return counted_attempt(io_deadline());
}

Status Lock::acquire(Nanos wait) {
  Clock& clock = this->clock();
  const Deadline deadline = Deadline::after(clock, wait);
  // The whole call ends by wait + one command budget: the last attempt may
  // start just before the wait runs out and still needs its round trip.
  const Deadline op_deadline =
      deadline.is_never() ? deadline : Deadline::at(deadline.when() + command_timeout());
  Status s = try_acquire();
  backoff_.reset();
  // Bounded by the deadline; the count is a second guard.
  for (uint32_t i = 0; !s.ok() && detail::retryable(s.code()) && i < 1000000; ++i) {
    const Nanos left = deadline.remaining(clock);
    if (left <= Nanos::zero()) break;
    // Wake signal, holder's TTL or backoff; with the signal, the attempt
    // may ride along (pipelined behind the BLPOP).
    Status next;
    if (!pause(s, left, op_deadline, &next)) {
      // Same token on retries: the script recognises a grant whose reply we lost.
      next = counted_attempt(io_deadline().min(op_deadline));
    }
    s = next;
  }
  return s;
}

Status Lock::release() {
  const TimePoint t0 = connection().clock().now();
  return noted(EventKind::kRelease, t0, send_release());
}

Status Lock::send_release() {
  if (!has_token_) return ErrorCode::kNotHeld;
  // Whatever the outcome, the lease is no longer ours to use: the delete
  // may run even if its reply never comes. The token stays for a retry.
  granted_ = false;
  valid_until_ = TimePoint();
  const Bytes keys[2] = {key(), Bytes(wake_key_, wake_key_len_)};
  const Bytes args[2] = {token(), Bytes::from_cstr(kWakeSignalTtlMs)};
  const size_t n = options_.wake_on_release ? 2 : 1;
  const Result<const Reply*> r = run_eval({&detail::kReleaseScript, {keys, n}, {args, n}}, io_deadline());
  if (!r.ok()) return r.status();
  // Only the script's 1 or 0 is an answer; anything else keeps the token
  // so the caller can try again.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || rep->integer > 1) {
    return detail::io(connection()).reject_reply("release wants 0 or 1");
  }
  forget();
  return rep->integer == 1 ? Status() : Status(ErrorCode::kNotOwner);
}

Status Lock::send_extend(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_) return ErrorCode::kNotHeld;
  char ms_text[24];
  const int n = std::snprintf(ms_text, sizeof ms_text, "%lld", detail::ms_arg(ttl));
  const Bytes keys[1] = {key()};
  const Bytes args[3] = {token(), Bytes(ms_text, static_cast<size_t>(n)),
                         Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set")};
  const TimePoint start = clock().now();
  // A renewal never waits past the lease it renews: at its end the caller
  // must learn of the loss (e.g. to stop the work it guards).
  const Deadline d =
      detail::capped_at_validity(io_deadline(), granted_ ? valid_until_ : TimePoint(), start);
  const Result<const Reply*> r = run_eval({&detail::kExtendScript, keys, args, true}, d);
  if (!r.ok()) return after_unknown_extend(start, ttl, r.status());
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || Millis(rep->integer) > 2 * kMaxTtl) {
    return after_unknown_extend(start, ttl, detail::io(connection()).reject_reply("extend wants a TTL or 0"));
  }
  if (rep->integer == 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  granted_ = true;
  valid_until_ = detail::validity_end(start, Millis(rep->integer), options_.drift_factor);
  // ok means usable: a TTL the round trip and drift eat is not (token kept).
  if (!held()) return ErrorCode::kExpired;
  return Status();
}

Status Lock::after_unknown_extend(TimePoint start, Millis ttl, Status s) {
  // The new TTL may have been applied (timeout, lost reply, WAIT short of
  // its replicas), or not: the lease lasts until the earlier of the two.
  if (granted_) {
    valid_until_ = detail::end_after_unknown_extend(valid_until_, start, ttl, options_.drift_factor);
  }
  return s;
}

Status Lock::extend(Millis ttl, ExtendMode mode) {
  const TimePoint t0 = connection().clock().now();
  return noted(EventKind::kExtend, t0, send_extend(ttl, mode));
}

Status Lock::reacquire() { return extend(options_.ttl, ExtendMode::kReplace); }

Result<bool> Lock::owned() {
  if (!has_token_) return ErrorCode::kNotHeld;
  const Bytes keys[1] = {key()};
  const Bytes args[1] = {token()};
  const Result<const Reply*> r = run_eval({&detail::kOwnedScript, keys, args}, io_deadline());
  if (!r.ok()) return r.status();
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || (rep->integer < -1 && rep->integer != -3)) {
    return detail::io(connection()).reject_reply("owned wants a PTTL or -3");
  }
  if (rep->integer == -3) {
    forget();
    noted(EventKind::kCheck, connection().clock().now(), ErrorCode::kNotOwner).ignore();
    return false;
  }
  return true;
}

Result<KeyStatus> Lock::status() {
  const Bytes args[2] = {Bytes::from_cstr("PTTL"), key()};
  const Result<const Reply*> r = run_command(args, io_deadline());
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger || r.value()->integer < -2) {
    return detail::io(connection()).reject_reply("PTTL wants an integer >= -2");
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
