// Counting semaphore with expiring permits: one script call per operation.
#include "edgelock/semaphore.h"

#include "edgelock/bytes.h"
#include "lease/lease_util.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {

namespace {
constexpr size_t kPermitIdLen = 32;  // 128 random bits as hex
// What the operation in flight is (LeaseCore::op()).
enum SemOp : uint8_t { kOpTry = 1, kOpAcquire, kOpRelease, kOpReleaseId, kOpExtend, kOpCount };
}  // namespace

// --- Permit: the lease a caller holds; the work is the semaphore's.

Status Permit::extend(Millis ttl) {
  return sem_ ? sem_->extend(this, ttl) : Status(ErrorCode::kNotHeld);
}

Status Permit::renew() { return sem_ ? extend(sem_->options_.ttl) : Status(ErrorCode::kNotHeld); }

Status Permit::release() { return sem_ ? sem_->release(this) : Status(ErrorCode::kNotHeld); }

Status Permit::start_extend(Millis ttl) {
  return sem_ ? sem_->begin_extend(this, ttl, true) : Status(ErrorCode::kNotHeld);
}

Status Permit::start_renew() {
  return sem_ ? start_extend(sem_->options_.ttl) : Status(ErrorCode::kNotHeld);
}

Status Permit::start_release() {
  return sem_ ? sem_->begin_release(this, token(), true) : Status(ErrorCode::kNotHeld);
}

Status Permit::step() { return in_progress() ? sem_->step() : Status(ErrorCode::kInvalidArgument); }

bool Permit::nonblocking() const { return sem_ && sem_->core_.steps(); }

bool Permit::in_progress() const { return sem_ && sem_->in_progress() && sem_->permit_ == this; }

size_t Permit::wait_fds(pollfd* out, size_t cap) const {
  return in_progress() ? sem_->wait_fds(out, cap) : 0;
}

Deadline Permit::next_deadline() const {
  return in_progress() ? sem_->next_deadline() : Deadline::never();
}

void Permit::cancel() {
  if (in_progress()) sem_->cancel();
}

Nanos Permit::remaining() const {
  return sem_ && granted_ ? sem_->core_.left(valid_until_) : Nanos::zero();
}

Bytes Permit::key() const { return sem_ ? sem_->key() : Bytes(); }

Nanos Permit::renew_budget() const { return sem_ ? sem_->core_.command_timeout() : Nanos::zero(); }

const char* Permit::last_error() const { return sem_ ? sem_->last_error() : ""; }

Clock& Permit::clock() const { return sem_ ? sem_->core_.clock() : default_clock(); }

// --- Semaphore.

Status Semaphore::init(Bytes key, const SemaphoreOptions& options) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (options.permits < 1 || options.permits > kMaxPermits) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.init(key, detail::timing_of(options)));
  options_ = options;
  return Status();
}

// The blocking calls: the start/step machine driven to its end.
Status Semaphore::try_acquire(Permit* permit) {
  return core_.run(begin_try(permit, false), &Semaphore::step_of, this);
}
Status Semaphore::start_try_acquire(Permit* permit) { return begin_try(permit, true); }
Status Semaphore::acquire(Permit* permit, Nanos wait) {
  return core_.run(begin_acquire(permit, wait, false), &Semaphore::step_of, this);
}
Status Semaphore::start_acquire(Permit* permit, Nanos wait) {
  return begin_acquire(permit, wait, true);
}
Status Semaphore::release(Permit* permit) {
  return core_.run(begin_release(permit, permit->token(), false), &Semaphore::step_of, this);
}
Status Semaphore::release_id(Bytes id) {
  return core_.run(begin_release(nullptr, id, false), &Semaphore::step_of, this);
}
Status Semaphore::extend(Permit* permit, Millis ttl) {
  return core_.run(begin_extend(permit, ttl, false), &Semaphore::step_of, this);
}

Status Semaphore::step() { return core_.step(&again_of, &reply_of, this); }

// A retry keeps the id: a grant whose reply was lost is found.
Status Semaphore::again_of(void* self, Deadline deadline) {
  return static_cast<Semaphore*>(self)->start_attempt(deadline);
}

Status Semaphore::reply_of(void* self, const Result<const Reply*>& r) {
  return static_cast<Semaphore*>(self)->on_reply(r);
}

Status Semaphore::on_reply(const Result<const Reply*>& r) {
  switch (req_) {
    case Req::kAttempt: return on_attempt(r);
    case Req::kHandBack: {
      const Status s = on_release(r);
      if (hand_back_noted_) core_.noted(EventKind::kRelease, op_t0_, s).ignore();
      return attempt_done(last_);
    }
    case Req::kRelease: return finish_release(on_release(r));
    case Req::kExtend: return core_.finish(EventKind::kExtend, op_t0_, on_extend(r));
    case Req::kCount: return core_.end_op(on_count(r));
  }
  return core_.end_op(ErrorCode::kInvalidArgument);
}

// --- Acquire.

Status Semaphore::begin_try(Permit* permit, bool nonblocking) {
  if (!core_.ready() || !permit) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpTry, nonblocking));
  return first_attempt(permit);
}

Status Semaphore::begin_acquire(Permit* permit, Nanos wait, bool nonblocking) {
  // A null permit or a semaphore not set up fails at once (not retryable).
  if (!core_.ready() || !permit) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpAcquire, nonblocking));
  core_.begin_wait(wait);
  return first_attempt(permit);
}

Status Semaphore::first_attempt(Permit* permit) {
  *permit = Permit();
  permit->sem_ = this;
  permit_ = permit;
  const Status minted = detail::LeaseCore::mint(permit->id_, kPermitIdLen);
  if (!minted.ok()) return core_.end_op(minted);
  permit->id_len_ = kPermitIdLen;
  return start_attempt(core_.io_deadline());
}

Status Semaphore::start_attempt(Deadline deadline) {
  // Retries keep the id (a grant whose reply was lost is found), except
  // after a hand-back of unknown outcome: that release may still land and
  // must find no grant under its id. The old permit lapses by its TTL.
  if (permit_->retired_) {
    permit_->clear();
    const Status minted = detail::LeaseCore::mint(permit_->id_, kPermitIdLen);
    if (!minted.ok()) return core_.end_op(minted);
    permit_->id_len_ = kPermitIdLen;
  }
  auto& w = words_;
  w.num[0].set(options_.ttl.count());
  w.num[1].set(options_.permits);
  w.key = key();
  w.args[0] = permit_->token();
  w.args[1] = w.num[0].bytes();
  w.args[2] = w.num[1].bytes();
  req_ = Req::kAttempt;
  req_start_ = core_.clock().now();
  return core_.send({&detail::kSemAcquireScript, {&w.key, 1}, {w.args, 3}, true}, deadline);
}

Status Semaphore::on_attempt(const Result<const Reply*>& r) {
  Permit* permit = permit_;
  // Failed: the grant may still have landed. The permit keeps its id, so a
  // retry re-arms it and release() removes it. Granted on the primary but
  // not confirmed by its replicas: hand it back.
  if (!r.ok()) {
    if (r.status().code() == ErrorCode::kNoQuorum) return hand_back(r.status(), false);
    return attempt_done(r.status());
  }
  int64_t granted = 0, value = 0;
  if (!detail::int_at(r.value(), 0, &granted) || !detail::int_at(r.value(), 1, &value)) {
    return attempt_done(ErrorCode::kProtocol);
  }
  // The script refused an empty id.
  if (granted < 0) return attempt_done(ErrorCode::kInvalidArgument);
  if (granted != 1) {
    core_.set_busy_ttl(Millis(value > 0 ? value : 0));
    return attempt_done(ErrorCode::kBusy);
  }
  permit->granted_ = true;
  permit->valid_until_ = core_.validity_end(req_start_, options_.ttl);
  if (permit->remaining() <= Nanos::zero()) {
    // Granted too late to use: hand it back, but keep the id. Wiping it
    // would make the retry ask for the permit "" (shared by every client
    // doing the same) and lose the permit if the hand-back failed.
    permit->unclaim();
    return hand_back(ErrorCode::kExpired, true);
  }
  return attempt_done(Status());
}

// Releases the permit the attempt got (counted as a release if `noted`);
// the attempt then ends with `then`.
Status Semaphore::hand_back(Status then, bool noted) {
  last_ = then;
  hand_back_noted_ = noted;
  op_t0_ = core_.clock().now();
  const Status s = release_request(permit_->token(), Req::kHandBack);
  permit_->retired_ = true;
  if (s.code() == ErrorCode::kInProgress) return s;
  if (noted) core_.noted(EventKind::kRelease, op_t0_, s).ignore();
  return attempt_done(then);
}

Status Semaphore::attempt_done(Status s) { return core_.after_attempt(s, req_start_); }

// --- Release: of a permit, or of an id alone (release_id()).

Status Semaphore::begin_release(Permit* permit, Bytes id, bool nonblocking) {
  if (!core_.ready()) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(permit ? kOpRelease : kOpReleaseId, nonblocking));
  permit_ = permit;
  op_t0_ = core_.clock().now();
  const Status s = release_request(id, Req::kRelease);
  // Sent or not, nothing is claimed under this id again (the delete may land).
  if (permit && id.size > 0) permit->retired_ = true;
  return s.code() == ErrorCode::kInProgress ? s : finish_release(s);
}

Status Semaphore::release_request(Bytes id, Req req) {
  if (id.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  if (id.size == 0) return ErrorCode::kNotHeld;
  auto& w = words_;
  w.key = key();
  w.args[0] = id;
  req_ = req;
  return core_.send({&detail::kSemReleaseScript, {&w.key, 1}, {w.args, 1}}, core_.io_deadline());
}

Status Semaphore::on_release(const Result<const Reply*>& r) {
  if (!r.ok()) return r.status();
  if (r.value()->type != ReplyType::kInteger) return ErrorCode::kProtocol;
  return r.value()->integer == 1 ? Status() : Status(ErrorCode::kNotOwner);
}

Status Semaphore::finish_release(Status s) {
  s = core_.noted(EventKind::kRelease, op_t0_, s);
  if (core_.op() == kOpRelease && permit_) {
    // Released, or not ours any more: either way this permit is done.
    if (s.ok() || s.code() == ErrorCode::kNotOwner) {
      permit_->clear();
    } else if (traits(s.code()).may_have_run) {
      permit_->unclaim();  // it may be gone: stop claiming it, keep the id to retry
    }
  }
  return core_.end_op(s);
}

// --- Extend.

Status Semaphore::begin_extend(Permit* permit, Millis ttl, bool nonblocking) {
  EDGELOCK_TRY(core_.begin_op(kOpExtend, nonblocking));
  permit_ = permit;
  op_t0_ = core_.clock().now();
  return core_.finish(EventKind::kExtend, op_t0_, extend_request(ttl));
}

Status Semaphore::extend_request(Millis ttl) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (permit_->id_len_ == 0 || permit_->retired_) return ErrorCode::kNotHeld;
  auto& w = words_;
  w.num[0].set(ttl.count());
  w.key = key();
  w.args[0] = permit_->token();
  w.args[1] = w.num[0].bytes();
  ext_ttl_ = ttl;
  req_start_ = core_.clock().now();
  req_ = Req::kExtend;
  // A renewal is worth waiting for only while the permit is still valid.
  const Deadline deadline =
      core_.renewal_deadline(permit_->granted_ ? permit_->valid_until_ : TimePoint(), req_start_);
  return core_.send({&detail::kSemExtendScript, {&w.key, 1}, {w.args, 2}, true}, deadline);
}

Status Semaphore::on_extend(const Result<const Reply*>& r) {
  Permit* permit = permit_;
  Status s = r.ok() ? Status() : r.status();
  if (s.ok() && r.value()->type != ReplyType::kInteger) s = ErrorCode::kProtocol;
  if (!s.ok()) {
    // Unknown outcome: the server may now hold the permit for `ttl` from
    // when it ran, which may be less than before.
    if (traits(s.code()).may_have_run) {
      permit->valid_until_ = core_.least_end(permit->valid_until_, req_start_, ext_ttl_);
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
  permit->valid_until_ = core_.validity_end(req_start_, ext_ttl_);
  if (permit->remaining() > Nanos::zero()) return Status();
  permit->unclaim();  // extended, but for less than the drift allowance
  return ErrorCode::kExpired;
}

Result<uint32_t> Semaphore::in_use() {
  uint32_t n = 0;
  EDGELOCK_TRY(core_.run(begin_count(&n, false), &Semaphore::step_of, this));
  return n;
}

Status Semaphore::begin_count(uint32_t* out, bool nonblocking) {
  if (!core_.ready() || !out) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpCount, nonblocking));
  count_out_ = out;
  req_ = Req::kCount;
  words_.key = key();
  return core_.send({&detail::kSemCountScript, {&words_.key, 1}}, core_.io_deadline());
}

Status Semaphore::on_count(const Result<const Reply*>& r) {
  if (!r.ok()) return r.status();
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer < 0 || rep->integer > UINT32_MAX) {
    return core_.reject("the permit count wants an integer >= 0");
  }
  *count_out_ = static_cast<uint32_t>(rep->integer);
  return Status();
}

}  // namespace edgelock
