// FairLock: its release and leaving the queue, as steps of the machine
// (fair_lock.cc): the fair scripts, which wake the head of the queue.
// Extend and the ownership check are Lock's (TokenLease).
#include "base/lock_keys.h"
#include "edgelock/fair_lock.h"
#include "primitives/fair_scripts.h"

namespace edgelock {

namespace {

constexpr Bytes kQueueCompanion[1] = {detail::kQueueSuffix};

using detail::kOpLeave;

}  // namespace

// --- Release.

Status FairLock::release_request(bool hand_back) {
  if (!has_token_) return ErrorCode::kNotHeld;
  // Whatever the outcome, the lease is no longer ours to use: the delete
  // may run even if its reply never comes. The token stays for a retry.
  granted_ = false;
  retired_ = true;  // the delete may land whenever: nothing is claimed under this token again
  valid_until_ = TimePoint();
  // The waiter our grant named as next: the release wakes it (0: none
  // known; the script then names the head, if any).
  next_wake_ = WakeSuffix(next_seq_);
  companions_[0] = detail::kQueueSuffix;
  companions_[1] = next_wake_.bytes();
  auto& w = words_;
  w.key = key();
  w.num[0].set(static_cast<int64_t>(next_seq_));
  num2_.set(options_.waiter_timeout.count());
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  w.args[2] = num2_.bytes();
  return send_call(hand_back ? Req::kHandBack : Req::kRelease,
                   {&detail::kFairReleaseScript, {&w.key, 1}, {w.args, 3}, false, {companions_, 2}},
                   core_.io_deadline());
}

Status FairLock::on_release(const Result<const Reply*>& r) {
  wake_seq_ = 0;
  if (!r.ok()) return r.status();
  // Only the script's 1, 0 or -seq is an answer; anything else keeps the
  // token so the caller can try again.
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer > 1) {
    return core_.reject("release wants 1, 0 or -seq");
  }
  forget();
  if (rep->integer == 0) return ErrorCode::kNotOwner;
  // Deleted, but the head is another waiter than the one named: wake it.
  if (rep->integer < 0) wake_seq_ = -rep->integer;
  return Status();
}

// --- Leaving the queue, and waking the head.

Status FairLock::begin_leave(bool nonblocking) {
  if (!queued()) return ErrorCode::kNotHeld;
  EDGELOCK_TRY(core_.begin_op(kOpLeave, nonblocking));
  last_ = Status();
  const Status s = leave_request(core_.io_deadline());
  if (s.code() == ErrorCode::kInProgress) return s;
  return core_.end_op(s);
}

// A waiter that stops waiting gives its place up now instead of holding
// up the queue until its deadline; if it was the head of a free lock, the
// next waiter is woken (best effort). Not counted as an operation.
Status FairLock::leave_request(Deadline deadline) {
  if (!queued()) return ErrorCode::kNotHeld;
  joined_ = false;
  position_ = 0;
  seq_ = 0;
  // Out of time: the place lapses by itself.
  if (deadline.expired(clock())) return ErrorCode::kTimeout;
  auto& w = words_;
  w.key = key();
  w.num[0].set(options_.waiter_timeout.count());
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  return send_call(Req::kLeave,
                   {&detail::kFairLeaveScript, {&w.key, 1}, {w.args, 2}, false, kQueueCompanion},
                   core_.io_deadline().min(deadline));
}

Status FairLock::on_leave(const Result<const Reply*>& r) {
  wake_seq_ = 0;
  if (!r.ok()) return r.status();
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || rep->integer > 1 || rep->integer == 0) {
    return core_.reject("leave wants 1 or -seq");
  }
  if (rep->integer < 0) wake_seq_ = -rep->integer;
  return Status();
}

// Wakes waiter wake_seq_ (the head a release or leave found, other than
// the one named): one signal on its wake list, then finish(after). Best
// effort: if it fails, the waiter wakes at its cap.
Status FairLock::wake_or_finish(Req after) {
  const int64_t seq = wake_seq_;
  wake_seq_ = 0;
  if (seq <= 0) return finish(after);
  wake_after_ = after;
  // The release or leave is answered: its companions are free again.
  next_wake_ = WakeSuffix(static_cast<uint64_t>(seq));
  companions_[0] = next_wake_.bytes();
  auto& w = words_;
  w.key = key();
  w.num[0].set(options_.waiter_timeout.count());
  w.args[0] = w.num[0].bytes();
  return send_call(Req::kWake,
                   {&detail::kFairWakeScript, {&w.key, 1}, {w.args, 1}, false, {companions_, 1}},
                   core_.io_deadline());
}

// The release, leave or wake is done: a hand-back goes on with the
// attempt it followed; anything else ends with last_.
Status FairLock::finish(Req after) {
  if (after == Req::kHandBack) return attempt_done(last_);
  return core_.end_op(last_);
}

}  // namespace edgelock
