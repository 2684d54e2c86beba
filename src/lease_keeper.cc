// Lease keeper: renewals driven by the caller's poll loop.
#include "edgelock/lease_keeper.h"

#include <cstdint>

namespace edgelock {
namespace {
constexpr TimePoint kNoRenewal = TimePoint::max();  // no renewal fits before the end
}  // namespace

Status LeaseKeeper::start() {
  if (options_.renew_every < Nanos::zero() || options_.retry_every < Nanos::zero() ||
      options_.lose_before < Nanos::zero() || options_.renew_budget < Nanos::zero()) {
    return ErrorCode::kInvalidArgument;
  }
  if (lease_->remaining() <= Nanos::zero()) return ErrorCode::kNotHeld;
  budget_ = options_.renew_budget;
  if (budget_ == Nanos::zero()) budget_ = lease_->renew_budget();
  if (budget_ < Nanos::zero()) budget_ = Nanos::zero();
  // Not even one renewal could end before the validity does: refuse
  // rather than promise a keeping that cannot happen.
  if (usable_left() - budget_ <= Nanos::zero()) return ErrorCode::kInvalidArgument;
  state_ = LeaseState::kKeeping;
  last_status_ = Status();
  lost_at_ = TimePoint();
  schedule(lease_->clock().now(), renew_delay());
  return Status();
}

void LeaseKeeper::stop() {
  if (state_ == LeaseState::kKeeping) state_ = LeaseState::kIdle;
}

void LeaseKeeper::lose(Status why, TimePoint now) {
  state_ = LeaseState::kLost;
  last_status_ = why;
  lost_at_ = now;
}

Nanos LeaseKeeper::renew_delay() const {
  if (options_.renew_every > Nanos::zero()) return options_.renew_every;
  // A third of the fresh validity; with a budget, early enough that a
  // renewal timing out still leaves room for another before the end.
  const Nanos every = usable_left() / 3;
  const Nanos room = usable_left() - budget_;
  return budget_ > Nanos::zero() && every > room / 2 ? room / 2 : every;
}

void LeaseKeeper::schedule(TimePoint now, Nanos delay) {
  // The latest start from which a renewal taking its whole budget still
  // ends before the keeper's end. Past it, only the loss is left to report.
  const TimePoint latest = now + usable_left() - budget_;
  if (latest <= now) {
    next_renew_at_ = kNoRenewal;
    return;
  }
  if (delay < Nanos(1)) delay = Nanos(1);
  next_renew_at_ = now + delay < latest ? now + delay : latest;
}

Deadline LeaseKeeper::next_deadline() const {
  if (state_ != LeaseState::kKeeping) return Deadline::never();
  // The keeper's end is a deadline of its own: a loss must be reported on
  // time even if no renewal is due (e.g. one is waiting to retry).
  const TimePoint keep_until = lease_->clock().now() + usable_left();
  return Deadline::at(next_renew_at_ < keep_until ? next_renew_at_ : keep_until);
}

LeaseState LeaseKeeper::service() {
  if (state_ != LeaseState::kKeeping) return state_;
  TimePoint now = lease_->clock().now();
  const Nanos usable = usable_left();
  if (usable <= Nanos::zero()) {
    lose(ErrorCode::kExpired, now);
    return state_;
  }
  if (now < next_renew_at_) return state_;
  const TimePoint keep_until = now + usable;
  const Status s = lease_->renew();
  now = lease_->clock().now();
  if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    lose(ErrorCode::kNotOwner, now);  // gone on the server: never re-create it
    return state_;
  }
  // A renewal that completes after the keeper's end came too late to
  // report on time, and an ok that leaves no usable validity proves
  // nothing: both count as lost.
  if (now >= keep_until || usable_left() <= Nanos::zero()) {
    lose(ErrorCode::kExpired, now);
    return state_;
  }
  if (s.ok()) {
    ++stats_.renewals;
    schedule(now, renew_delay());
    return state_;
  }
  ++stats_.failures;
  last_status_ = s;
  Nanos retry = options_.retry_every > Nanos::zero() ? options_.retry_every : usable_left() / 4;
  if (retry < Millis(1)) retry = Millis(1);
  schedule(now, retry);
  return state_;
}

}  // namespace edgelock
