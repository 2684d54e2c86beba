// Lease keeper: renewals driven by the caller's poll loop; on a lease with
// the non-blocking face a renewal is started and then stepped, so the loop
// is never held up by one.
#include "edgelock/lease_keeper.h"

#include <cstdint>

namespace edgelock {
namespace {
constexpr TimePoint kNoRenewal = TimePoint::max();  // no renewal fits before the end
// While a renewal is out, next_deadline() comes back after 1, 2, 4, ... ms,
// then every kMaxLook: a loop that honours only next_deadline() (and does
// not watch wait_fds()) still reads the reply soon after it arrives.
constexpr Nanos kFirstLook = Millis(1);
constexpr Nanos kMaxLook = Millis(50);

// The next look at a renewal out for `since`.
Nanos next_look(Nanos since) {
  if (since >= kMaxLook) return (since / kMaxLook + 1) * kMaxLook;
  Nanos look = kFirstLook;
  while (look <= since) look *= 2;
  return look < kMaxLook ? look : kMaxLook;
}
}  // namespace

Status LeaseKeeper::start() {
  if (options_.renew_every < Nanos::zero() || options_.retry_every < Nanos::zero() ||
      options_.lose_before < Nanos::zero() || options_.renew_budget < Nanos::zero()) {
    return ErrorCode::kInvalidArgument;
  }
  if (lease_->remaining() <= Nanos::zero()) return ErrorCode::kNotHeld;
  cancel_renewal();
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
  cancel_renewal();
  if (state_ == LeaseState::kKeeping) state_ = LeaseState::kIdle;
}

void LeaseKeeper::cancel_renewal() {
  if (!renewing_) return;
  renewing_ = false;
  lease_->cancel();
}

const char* LeaseKeeper::loss_text() const {
  if (state_ != LeaseState::kLost) return "";
  if (last_status_.code() == ErrorCode::kNotOwner) {
    return "lease lost: the key is gone from the server or held by another owner";
  }
  return "lease lost: no renewal succeeded before its validity ran out";
}

void LeaseKeeper::lose(Status why, TimePoint now) {
  cancel_renewal();
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
  // A non-blocking renewal may start until the end itself: it never holds
  // the loop, and one still out at the end is given up there.
  const TimePoint latest = now + usable_left() - (lease_->nonblocking() ? Nanos::zero() : budget_);
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
  if (renewing_) {
    const TimePoint look = renew_started_ + next_look(lease_->clock().now() - renew_started_);
    return lease_->next_deadline().min(Deadline::at(keep_until < look ? keep_until : look));
  }
  return Deadline::at(next_renew_at_ < keep_until ? next_renew_at_ : keep_until);
}

size_t LeaseKeeper::wait_fds(pollfd* out, size_t cap) const {
  return renewing_ && state_ == LeaseState::kKeeping ? lease_->wait_fds(out, cap) : 0;
}

LeaseState LeaseKeeper::step() {
  if (state_ != LeaseState::kKeeping) return state_;
  Clock& clock = lease_->clock();
  const TimePoint now = clock.now();
  if (renewing_) {
    // The keeper's end came with the renewal still out: too late to count,
    // whatever it brings.
    if (now >= keep_until_ || usable_left() <= Nanos::zero()) {
      lose(ErrorCode::kExpired, now);
      return state_;
    }
    const Status s = lease_->step();
    if (s.code() == ErrorCode::kInProgress) return state_;
    renewing_ = false;
    return renewed(s, clock.now());
  }
  const Nanos usable = usable_left();
  if (usable <= Nanos::zero()) {
    lose(ErrorCode::kExpired, now);
    return state_;
  }
  if (now < next_renew_at_) return state_;
  keep_until_ = now + usable;
  // Blocking renew(), or the start of a non-blocking one; its end is
  // read after it returns.
  const Status s = lease_->nonblocking() ? lease_->start_renew() : lease_->renew();
  if (s.code() != ErrorCode::kInProgress) return renewed(s, clock.now());
  renewing_ = true;
  renew_started_ = now;
  // Starting may block (a reconnect, up to the validity's end): past the
  // keeper's end only the loss is left to report, not kKeeping.
  const TimePoint started = clock.now();
  if (started >= keep_until_ || usable_left() <= Nanos::zero()) lose(ErrorCode::kExpired, started);
  return state_;
}

// A renewal ended with `s` at `now`.
LeaseState LeaseKeeper::renewed(Status s, TimePoint now) {
  if (s.code() == ErrorCode::kNotOwner || s.code() == ErrorCode::kNotHeld) {
    lose(ErrorCode::kNotOwner, now);  // gone on the server: never re-create it
    return state_;
  }
  // A renewal that completes after the keeper's end came too late to
  // report on time, and an ok that leaves no usable validity proves
  // nothing: both count as lost.
  if (now >= keep_until_ || usable_left() <= Nanos::zero()) {
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
