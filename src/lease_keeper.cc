// Lease keeper: renewals driven by the caller's poll loop.
#include "edgelock/lease_keeper.h"

namespace edgelock {

Status LeaseKeeper::start() {
  if (!target_.lock || !target_.renew || !target_.remaining) return ErrorCode::kInvalidArgument;
  if (options_.renew_every < 0 || options_.retry_every < 0) return ErrorCode::kInvalidArgument;
  if (validity_left() <= 0) return ErrorCode::kNotHeld;
  state_ = LeaseState::kKeeping;
  last_error_ = Status();
  lost_at_ = 0;
  schedule_after_renewal(clock_->now());
  return Status();
}

void LeaseKeeper::stop() {
  if (state_ == LeaseState::kKeeping) state_ = LeaseState::kIdle;
}

void LeaseKeeper::lose(Status why, Nanos now) {
  state_ = LeaseState::kLost;
  last_error_ = why;
  lost_at_ = now;
}

void LeaseKeeper::schedule_after_renewal(Nanos now) {
  // A third of a fresh validity leaves two more chances before it ends.
  Nanos every = options_.renew_every > 0 ? options_.renew_every : validity_left() / 3;
  if (every < 1) every = 1;
  next_renew_at_ = now + every;
}

Deadline LeaseKeeper::next_deadline() const {
  if (state_ != LeaseState::kKeeping) return Deadline::never();
  const Nanos now = clock_->now();
  // The validity's end is a deadline of its own: a loss must be reported
  // on time even if no renewal is due (e.g. one is waiting to retry).
  const Nanos valid_until = now + validity_left();
  return Deadline::at(next_renew_at_ < valid_until ? next_renew_at_ : valid_until);
}

LeaseState LeaseKeeper::service() {
  if (state_ != LeaseState::kKeeping) return state_;
  Nanos now = clock_->now();
  const Nanos left = validity_left();
  if (left <= 0) {
    lose(ErrorCode::kExpired, now);
    return state_;
  }
  if (now < next_renew_at_) return state_;
  const Nanos old_end = now + left;
  const Status s = target_.renew(target_.lock);
  now = clock_->now();
  if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    lose(ErrorCode::kNotOwner, now);  // gone on the server: never re-create it
    return state_;
  }
  // A renewal that completes after the old validity ended leaves a gap in
  // which we could not prove ownership: that counts as lost.
  if (now >= old_end || validity_left() <= 0) {
    lose(ErrorCode::kExpired, now);
    return state_;
  }
  if (s.ok()) {
    ++stats_.renewals;
    schedule_after_renewal(now);
    return state_;
  }
  ++stats_.failures;
  last_error_ = s;
  Nanos retry = options_.retry_every > 0 ? options_.retry_every : validity_left() / 4;
  if (retry < millis(1)) retry = millis(1);
  next_renew_at_ = now + retry;
  return state_;
}

}  // namespace edgelock
