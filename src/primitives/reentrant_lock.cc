// Reentrant lock: one script call per operation, depth kept on the server.
#include "edgelock/reentrant_lock.h"

#include <cstring>

#include "base/lock_keys.h"
#include "edgelock/bytes.h"
#include "lease/lease_util.h"
#include "primitives/reentrant_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kOwnerLen = 32;  // 128 random bits as hex
constexpr uint32_t kMaxDepth = 1u << 31;
// KEYS[2] of the acquire: the fence counter.
constexpr Bytes kFenceCompanion[1] = {detail::kFenceSuffix};

using detail::kOpAcquire;
using detail::kOpTry;
}  // namespace

Status ReentrantLock::init(Bytes key, const ReentrantLockOptions& options, Bytes owner) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (owner.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key, detail::timing_of(options), kFenceCompanion));
  EDGELOCK_TRY(core_.mint(handle_, sizeof handle_));
  if (owner.size == 0) {
    EDGELOCK_TRY(core_.mint(token_, kOwnerLen));
    token_len_ = kOwnerLen;
  } else {
    std::memcpy(token_, owner.data, owner.size);
    token_len_ = static_cast<uint8_t>(owner.size);
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

// Ours at a depth we never set: a request given up on landed after a
// newer one. No level is claimed, but the key stays ours until release()
// deletes it, at whatever depth.
void ReentrantLock::lose_levels() {
  forget();
  most_ = kMaxDepth;
}

void ReentrantLock::maybe_holds(uint32_t levels) {
  if (levels > most_) most_ = levels;
}

Nanos ReentrantLock::remaining() const {
  return depth_ > 0 ? core_.left(valid_until_) : Nanos::zero();
}

uint32_t ReentrantLock::depth() const { return remaining() > Nanos::zero() ? depth_ : 0; }

// KEYS[1] = the hash; with `fenced` (acquire) KEYS[2] = the fence counter;
// ARGV = words_.args[0, nargs).
Status ReentrantLock::send(const Script& script, bool fenced, size_t nargs, bool writes,
                           Deadline deadline) {
  words_.key = key();
  return core_.send({&script,
                     {&words_.key, 1},
                     {words_.args, nargs},
                     writes,
                     {kFenceCompanion, fenced ? 1u : 0u}},
                    deadline);
}

// The blocking calls: the start/step machine driven to its end.
Status ReentrantLock::try_acquire() { return drive(begin_acquire(false, Nanos::zero(), false)); }
Status ReentrantLock::start_try_acquire() { return begin_acquire(false, Nanos::zero(), true); }
Status ReentrantLock::acquire(Nanos wait) { return drive(begin_acquire(true, wait, false)); }
Status ReentrantLock::start_acquire(Nanos wait) { return begin_acquire(true, wait, true); }

// A retry (attempt_again()) asks for the same depth: a grant whose reply
// was lost is found.
Status ReentrantLock::on_reply(const Result<const Reply*>& r) {
  switch (req_) {
    case Req::kAttempt: return on_attempt(r);
    case Req::kHandBack:
      core_.noted(EventKind::kRelease, op_t0_, on_release(r)).ignore();
      return attempt_done(last_);
    case Req::kRelease: return core_.finish(EventKind::kRelease, op_t0_, on_release(r));
  }
  return core_.end_op(ErrorCode::kInvalidArgument);
}

// --- Acquire.

Status ReentrantLock::begin_acquire(bool wait_too, Nanos wait, bool nonblocking) {
  if (!core_.ready() || depth_ >= kMaxDepth) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(wait_too ? kOpAcquire : kOpTry, nonblocking));
  if (wait_too) core_.begin_wait(wait);
  // A grant from depth 0 with no level possibly left gets a new nonce.
  if (depth_ == 0 && most_ == 0) retired_ = true;
  return start_attempt(core_.io_deadline());
}

Status ReentrantLock::start_attempt(Deadline deadline) {
  // Same nonce on retries: a grant whose reply was lost is found. A new
  // one after a last-level release was sent (that delete may still land,
  // and must find no grant under it; a level it never deleted lapses by
  // its TTL) and for every grant from depth 0.
  if (retired_ && depth_ == 0) {
    const Status minted = detail::LeaseCore::mint(handle_, sizeof handle_);
    if (!minted.ok()) return core_.end_op(minted);
    most_ = 0;
    retired_ = false;
  }
  want_ = depth_ + 1;
  auto& w = words_;
  w.num[0].set(options_.ttl.count());
  w.num[1].set(want_);
  w.num[2].set(most_ > want_ ? most_ : want_);
  w.args[0] = owner();
  w.args[1] = w.num[0].bytes();
  w.args[2] = w.num[1].bytes();
  w.args[3] = handle();
  w.args[4] = w.num[2].bytes();
  req_ = Req::kAttempt;
  attempt_start_ = clock().now();
  return send(detail::kReentrantAcquireScript, true, 5, true, deadline);
}

Status ReentrantLock::on_attempt(const Result<const Reply*>& r) {
  int64_t code = 0, value = 0;
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && (!detail::int_at(r.value(), 0, &code) || !detail::int_at(r.value(), 1, &value))) {
    s = ErrorCode::kProtocol;
  }
  if (!s.ok()) {
    // The level may have landed (and re-armed the TTL, maybe shorter):
    // count it for release(), claim the least validity.
    if (traits(s.code()).may_have_run) unknown_outcome(want_, attempt_start_, options_.ttl);
    return attempt_done(s);
  }
  if (code == 0) {
    // Someone else holds it. most_ stays: an earlier attempt given up on
    // may still land once they let go, and release() removes it.
    core_.set_busy_ttl(Millis(value));
    return attempt_done(ErrorCode::kBusy);
  }
  if (code < 0 || code != static_cast<int64_t>(want_)) {
    if (code == -2) {
      lose_levels();
    } else {
      forget();  // expired or taken: no level is ours any more
    }
    return attempt_done(ErrorCode::kNotOwner);
  }
  depth_ = most_ = want_;
  fence_ = static_cast<uint64_t>(value);
  valid_until_ = core_.validity_end(attempt_start_, options_.ttl);
  if (remaining() > Nanos::zero()) return attempt_done(Status());
  return hand_back(ErrorCode::kExpired);  // this level came too late to use
}

Status ReentrantLock::attempt_done(Status s) { return core_.after_attempt(s, attempt_start_); }

void ReentrantLock::unknown_outcome(uint32_t most, TimePoint start, Millis ttl) {
  maybe_holds(most);
  valid_until_ = core_.least_end(valid_until_, start, ttl);
}

// --- Release.

Status ReentrantLock::release_request(bool hand_back) {
  if (depth_ == 0 && most_ == 0) return ErrorCode::kNotHeld;
  // After an acquire whose outcome we never learnt the level may be there
  // even at depth 0: release() removes it too.
  want_ = depth_ > 0 ? depth_ - 1 : 0;
  if (want_ == 0) retired_ = true;  // this request may delete the grant, whenever it runs
  auto& w = words_;
  w.num[0].set(want_);
  w.num[1].set(options_.ttl.count());
  w.num[2].set(most_);
  w.args[0] = owner();
  w.args[1] = w.num[0].bytes();
  w.args[2] = w.num[1].bytes();
  w.args[3] = handle();
  w.args[4] = w.num[2].bytes();
  req_ = hand_back ? Req::kHandBack : Req::kRelease;
  req_start_ = clock().now();
  return send(detail::kReentrantReleaseScript, false, 5, false, core_.io_deadline());
}

Status ReentrantLock::on_release(const Result<const Reply*>& r) {
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (traits(s.code()).may_have_run) {
      // The level may be gone: stop counting it (at depth 0 nothing is
      // claimed), but remember it may be there so release() can retry.
      depth_ = want_;
      unknown_outcome(most_, req_start_, options_.ttl);
    }
    return s;
  }
  const int64_t d = r.value()->integer;
  if (d < 0 || d != static_cast<int64_t>(want_)) {
    if (d == -2) {
      lose_levels();
    } else {
      forget();
    }
    return ErrorCode::kNotOwner;
  }
  depth_ = most_ = want_;
  if (depth_ == 0) {
    forget();
    return Status();
  }
  valid_until_ = core_.validity_end(req_start_, options_.ttl);
  // The level is released; the others are held but their refreshed TTL
  // came back too late to claim.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

// --- Extend.

Status ReentrantLock::extend_request(Millis ttl, ExtendMode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (depth_ == 0) return ErrorCode::kNotHeld;
  auto& w = words_;
  w.num[0].set(ttl.count());
  w.args[0] = owner();
  w.args[1] = w.num[0].bytes();
  w.args[2] = handle();
  ext_ttl_ = ttl;
  req_start_ = clock().now();
  // A renewal is worth waiting for only while the lease is still valid.
  const Deadline deadline = core_.renewal_deadline(valid_until_, req_start_);
  return send(detail::kReentrantExtendScript, false, 3, true, deadline);
}

Status ReentrantLock::on_extend(const Result<const Reply*>& r) {
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    if (traits(s.code()).may_have_run) unknown_outcome(depth_, req_start_, ext_ttl_);
    const bool lapsed = remaining() <= Nanos::zero() && s.code() == ErrorCode::kTimeout;
    return lapsed ? Status(ErrorCode::kExpired) : s;
  }
  if (r.value()->integer <= 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  valid_until_ = core_.validity_end(req_start_, ext_ttl_);
  // Extended, but for less than the drift allowance: not usable.
  return remaining() > Nanos::zero() ? Status() : Status(ErrorCode::kExpired);
}

}  // namespace edgelock
