// FairLock: joining the queue, the grant, and leaving the queue. One script
// call per step (fair_scripts.h).
#include "edgelock/fair_lock.h"

#include <cstring>

#include "edgelock/detail/connection_io.h"
#include "fair_scripts.h"
#include "lock_keys.h"

namespace edgelock {

namespace {

constexpr size_t kTokenLen = 32;  // 128 random bits as hex
// A waiter renews every waiter_timeout / 2; the server ends a BLPOP up to
// one timer period late (1 / hz: 100 ms by default), and the renewal needs
// its round trip: half of this leaves room for both.
constexpr Millis kMinWaiterTimeout{500};

// KEYS[2..] of the acquire and of leaving the queue.
constexpr Bytes kAcquireCompanions[2] = {detail::kFenceSuffix, detail::kQueueSuffix};
constexpr Bytes kQueueCompanion[1] = {detail::kQueueSuffix};

}  // namespace

Status FairLock::init(Bytes key, const FairLockOptions& options) {
  if (options.waiter_timeout < kMinWaiterTimeout || options.waiter_timeout > kMaxTtl) {
    return ErrorCode::kInvalidArgument;
  }
  // The core checks the key and that the back end serves its companions
  // with it (every companion shares the key's slot: lock_keys.h).
  EDGELOCK_TRY(core_.init(key,
                          {options.ttl, options.drift_factor, options.retry_min, options.retry_max},
                          kAcquireCompanions));
  wake_supported_ = true;
  options_ = options;
  forget();
  return Status();
}

void FairLock::forget() {
  has_token_ = false;
  retired_ = false;
  granted_ = false;
  joined_ = false;
  position_ = 0;
  seq_ = 0;
  next_seq_ = 0;
  valid_until_ = TimePoint();
  fence_ = 0;
}

FairLock::WakeSuffix::WakeSuffix(uint64_t seq) {
  ByteBuilder b(text, sizeof text);
  b.append(":w:", 3);
  b.append_decimal(static_cast<int64_t>(seq));
  len = b.size();
}

Status FairLock::wake_key_of(uint64_t seq, detail::CompanionKey* out) const {
  return out->set(key(), WakeSuffix(seq).bytes());
}

// Wakes waiter `seq` (the head a release or leave found, other than the
// one named): one signal on its wake list. Best effort: if it fails, the
// waiter wakes at its cap.
void FairLock::wake(int64_t seq) {
  detail::CompanionKey k;
  if (seq <= 0 || !wake_key_of(static_cast<uint64_t>(seq), &k).ok()) return;
  const Bytes keys[1] = {k.bytes()};
  const detail::DecimalText join(options_.waiter_timeout);
  const Bytes args[1] = {join.bytes()};
  core_.backend()
      .eval({&detail::kFairWakeScript, keys, args}, core_.io_deadline())
      .status()
      .ignore();
}

Nanos FairLock::remaining() const { return granted_ ? core_.left(valid_until_) : Nanos::zero(); }

// The fair scripts are too long to re-send by body with long keys: when
// the server has lost them (NOSCRIPT) and the EVAL does not fit the
// command buffer, the connection refuses it unsent (kBufferTooSmall).
// SCRIPT LOAD carries the body without the keys (it always fits:
// eval_capacity.h), then the EVALSHA is sent again.
Result<const Reply*> FairLock::eval(const ScriptCall& call, Deadline deadline) {
  const Result<const Reply*> r = core_.backend().eval(call, deadline);
  if (r.ok() || r.status().code() != ErrorCode::kBufferTooSmall) return r;
  const Bytes load[3] = {Bytes::from_cstr("SCRIPT"), Bytes::from_cstr("LOAD"),
                         Bytes(call.script->body, call.script->len)};
  const Result<const Reply*> loaded = core_.backend().command(key(), load, deadline);
  if (!loaded.ok()) return loaded.status();
  if (loaded.value()->type != ReplyType::kString || loaded.value()->len != 40) {
    return core_.reject("SCRIPT LOAD wants a SHA-1");
  }
  return core_.backend().eval(call, deadline);
}

// One counted attempt; with `blpop`, pipelined behind that command on the
// plain connection (fair_lock_wait.cc).
Status FairLock::attempt(Deadline deadline, bool join, Span<const Bytes> blpop) {
  // Retries keep the token (our place, and a grant whose reply was lost),
  // except after a hand-back of unknown outcome: that delete may still land
  // and must find no grant under its token. The old lease lapses by its
  // TTL; the new token queues afresh.
  if (retired_) {
    forget();
    EDGELOCK_TRY(core_.mint(token_, kTokenLen));
    token_len_ = kTokenLen;
  }
  const Bytes keys[1] = {key()};
  // +waiter_timeout joins the queue, -waiter_timeout only tries.
  const detail::DecimalText ttl(options_.ttl);
  const detail::DecimalText stay(join ? options_.waiter_timeout : -options_.waiter_timeout);
  const Bytes args[3] = {token(), ttl.bytes(), stay.bytes()};
  // From here a lost reply may mean the key is ours: keep the token so
  // release() can clean up, and leave the queue if the wait ends.
  has_token_ = true;
  joined_ = joined_ || join;
  // Validity counts from before the request leaves (before the BLPOP, if
  // any): the server's TTL may have started any time after this.
  const TimePoint start = clock().now();
  const ScriptCall call{&detail::kFairAcquireScript, keys, args, true, kAcquireCompanions};
  if (blpop.empty())
    return core_.noted(EventKind::kAcquire, start, on_acquire_reply(eval(call, deadline), start));
  Status first;
  Result<const Reply*> r =
      detail::io(*core_.backend().direct()).command_then_eval(blpop, call, deadline, &first);
  // Redis < 6 refuses BLPOP's fractional timeout: stop waiting on signals.
  if (first.code() == ErrorCode::kServerError) wake_supported_ = false;
  // NOSCRIPT with an EVAL too long to re-send: nothing ran; load and retry.
  if (r.status().code() == ErrorCode::kBufferTooSmall) r = eval(call, deadline);
  return core_.noted(EventKind::kAcquire, start, on_acquire_reply(r, start));
}

Status FairLock::on_acquire_reply(const Result<const Reply*>& r, TimePoint start) {
  if (!r.ok()) {
    // Granted on the primary but not confirmed by its replicas: a failover
    // could lose it, so hand it back rather than report a grant.
    if (r.status().code() == ErrorCode::kNoQuorum) release().ignore();
    return r.status();
  }
  // Fail closed: only {fence >= 1, next seq >= 0} is a grant.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kArray || rep->count < 2 ||
      rep->elements[0].type != ReplyType::kInteger) {
    return core_.reject("fair acquire wants an array");
  }
  if (rep->elements[0].integer <= 0) return on_busy_reply(rep);
  if (rep->count != 2 || rep->elements[1].type != ReplyType::kInteger ||
      rep->elements[1].integer < 0) {
    return core_.reject("fair grant wants {fence, next seq}");
  }
  granted_ = true;
  joined_ = false;  // the grant took us out of the queue
  position_ = 0;
  seq_ = 0;
  fence_ = static_cast<uint64_t>(rep->elements[0].integer);
  next_seq_ = static_cast<uint64_t>(rep->elements[1].integer);
  valid_until_ = core_.validity_end(start, options_.ttl);
  if (remaining() <= Nanos::zero()) {
    release().ignore();  // too late to use: hand it back at once
    return ErrorCode::kExpired;
  }
  return Status();
}

// {-wait_ms, position, seq}: how long until something changes by expiry,
// and where we stand (0, 0 if not queued).
Status FairLock::on_busy_reply(const Reply* rep) {
  if (rep->count != 3 || rep->elements[1].type != ReplyType::kInteger ||
      rep->elements[2].type != ReplyType::kInteger || rep->elements[1].integer < 0 ||
      rep->elements[1].integer > UINT32_MAX || rep->elements[2].integer < 0) {
    return core_.reject("fair busy wants {-wait_ms, position, seq}");
  }
  hint_ = Millis(-rep->elements[0].integer);
  core_.set_busy_ttl(hint_);
  position_ = static_cast<uint32_t>(rep->elements[1].integer);
  const uint64_t seq = static_cast<uint64_t>(rep->elements[2].integer);
  // A new arrival number (first join, or joined again after dropping out):
  // our wake list is named after it.
  if (seq != seq_) {
    seq_ = 0;
    if (seq != 0) seq_ = seq;
  }
  return ErrorCode::kBusy;
}

Status FairLock::try_acquire() {
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  forget();
  EDGELOCK_TRY(core_.mint(token_, kTokenLen));
  token_len_ = kTokenLen;
  return attempt(core_.io_deadline(), false);
}

Status FairLock::acquire(Nanos wait, GiveUp give_up) {
  const bool kept = queued();
  if (wait == Nanos::zero() && !kept) return try_acquire();
  if (!core_.ready() || remaining() > Nanos::zero()) return ErrorCode::kInvalidArgument;
  if (!kept) {
    forget();
    EDGELOCK_TRY(core_.mint(token_, kTokenLen));
    token_len_ = kTokenLen;
  }
  const Deadline deadline = core_.wait_deadline(wait);
  // The whole call ends by the wait + one command budget (as the retry
  // loop's attempts do); leaving the queue fits in what is left of it.
  const Deadline op_deadline =
      deadline.is_never() ? deadline : Deadline::at(deadline.when() + core_.command_timeout());
  const auto step = [](void* self, Status last, Nanos left, Deadline op) {
    return static_cast<FairLock*>(self)->next_attempt(last, left, op);
  };
  const Status first = attempt(core_.io_deadline().min(op_deadline), true);
  const Status s = core_.retry(first, deadline, detail::RetryOn::kTransient, step, this);
  if (!s.ok() && give_up == GiveUp::kLeave) leave_queue(op_deadline).ignore();
  return s;
}

Status FairLock::leave() { return leave_queue(core_.io_deadline()); }

Status FairLock::next_attempt(Status last, Nanos left, Deadline op_deadline) {
  // Wake signal, holder's TTL or backoff; with the signal, the attempt may
  // ride along (pipelined behind the BLPOP).
  Status next;
  if (pause(last, left, op_deadline, &next)) return next;
  // Same token on retries: the script keeps our place and recognises a
  // grant whose reply we lost.
  return attempt(core_.io_deadline().min(op_deadline), true);
}

// A waiter that stops waiting gives its place up now instead of holding
// up the queue until its deadline; if it was the head of a free lock, the
// next waiter is woken (best effort). Not counted as an operation.
Status FairLock::leave_queue(Deadline op_deadline) {
  if (!queued()) return ErrorCode::kNotHeld;
  joined_ = false;
  position_ = 0;
  seq_ = 0;
  // Out of time: the place lapses by itself.
  if (op_deadline.expired(clock())) return ErrorCode::kTimeout;
  const Bytes keys[1] = {key()};
  const detail::DecimalText join(options_.waiter_timeout);
  const Bytes args[2] = {token(), join.bytes()};
  const Result<const Reply*> r =
      eval({&detail::kFairLeaveScript, keys, args, false, kQueueCompanion},
           core_.io_deadline().min(op_deadline));
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger || r.value()->integer > 1 || r.value()->integer == 0) {
    return core_.reject("leave wants 1 or -seq");
  }
  if (r.value()->integer < 0) wake(-r.value()->integer);
  return Status();
}

}  // namespace edgelock
