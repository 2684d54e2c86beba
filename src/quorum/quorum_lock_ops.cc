// Quorum lock: release, extend, owned, and per-server bookkeeping.
#include <cstring>

#include "base/duration.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/quorum_lock.h"
#include "primitives/lock_scripts.h"
#include "quorum/quorum_fanout.h"
#include "quorum/quorum_math.h"

namespace edgelock {

bool QuorumLock::server_down(size_t i) const { return i < n_ && clock().now() < down_until_[i]; }

const char* QuorumLock::last_error() const {
  return last_failed_ < n_ ? conns_[last_failed_]->last_error() : "";
}

// A server that answered is up; one we could not reach, or that let a whole
// round pass in silence, is skipped for a doubling backoff. A request merely
// left in flight because the round was decided early says nothing.
void QuorumLock::note_servers(TimePoint now, bool timed_out) {
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (!s.want) continue;
    if (s.outcome == detail::SlotOutcome::kReplied) {
      down_level_[i] = 0;
      down_until_[i] = TimePoint();
      continue;
    }
    if (s.in_flight && !timed_out) continue;  // left behind by an early decision
    last_failed_ = static_cast<uint8_t>(i);
    if (s.outcome == detail::SlotOutcome::kFailed && s.sent) continue;  // error reply: it is up
    if (down_level_[i] < UINT8_MAX) ++down_level_[i];
    down_until_[i] = now + down_step(down_level_[i]);
  }
}

// The skip after `level` failures in a row: down_min, doubling per
// failure, at most down_max.
Nanos QuorumLock::down_step(uint8_t level) const {
  Nanos step = options_.down_min;
  for (uint8_t i = 1; i < level && step < options_.down_max; ++i) step *= 2;
  return step < options_.down_max ? step : options_.down_max;
}

// The wait's end plus one round: the last attempt may start just before
// the wait ends, and its round gets its budget (the clean-up round has its
// own).
Deadline QuorumLock::limit() const {
  return wait_until_.is_never() ? wait_until_ : Deadline::at(wait_until_.when() + server_timeout());
}

// The attempt's limit: the first attempt has its own round's only.
Deadline QuorumLock::round_limit() const { return attempts_ > 0 ? limit() : Deadline::never(); }

// When the attempt's lease, if granted, stops being safe to use.
TimePoint QuorumLock::attempt_end() const {
  return detail::validity_end(attempt_start_, options_.ttl, options_.drift_factor);
}

void QuorumLock::want_holders(bool skip_down, TimePoint now) {
  for (size_t i = 0; i < n_; ++i) {
    slots_[i].want = maybe_holds_[i] && !(skip_down && now < down_until_[i]);
  }
}

Deadline QuorumLock::round_deadline(Deadline limit) const {
  return Deadline::after(clock(), server_timeout()).min(limit);
}

// Starts the release round on every server that may hold our token, with
// one deadline of server_timeout for the whole round. A release is decided
// once a majority is known not to hold the token (any reply counts;
// servers never granted count already) and every request is out: the
// stragglers' replies are read before the next request on their
// connections. A failed acquire's hand-back waits for every server, so the
// attempt leaves nothing behind that it could have read. On a server still
// working on an earlier request the release is queued behind it (it runs
// after that request, even if the round ends first). False if no server
// may hold it (no round).
bool QuorumLock::start_release_round(Stage stage) {
  const Deadline deadline = Deadline::after(clock(), server_timeout());  // before any I/O
  want_holders(false, TimePoint());
  size_t asked = 0;
  for (size_t i = 0; i < n_; ++i) asked += slots_[i].want ? 1 : 0;
  release_any_ = asked > 0;
  if (!release_any_) return false;
  const size_t known_free = n_ - asked;
  const size_t goal = known_free >= quorum() ? 0 : quorum() - known_free;
  const detail::FanoutRequest req{{&detail::kReleaseScript, keys_, {acquire_args_, 1}}, true};
  begin_round(stage, req, {goal, 0, stage != Stage::kRelease, true}, deadline).ignore();
  return true;
}

// After the release round (fr null: there was none). Returns how many
// deleted our key; released_on_ = servers known not to hold it.
size_t QuorumLock::release_end(const detail::FanoutResult* fr) {
  if (fr) note_servers(fr->decided_at, fr->timed_out);
  size_t deleted = 0;
  released_on_ = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (release_any_ && s.want && s.outcome == detail::SlotOutcome::kReplied) {
      maybe_holds_[i] = false;
      deleted += s.value == 1 ? 1 : 0;
    }
    released_on_ += maybe_holds_[i] ? 0 : 1;
  }
  return deleted;
}

// Released on a majority is released: no other client can be kept from a
// majority by what is left, and each straggler has the release queued
// behind its last request, or frees the key when its TTL ends.
Status QuorumLock::release() { return run(begin_release()); }

Status QuorumLock::start_release() {
  const Status s = begin_release();
  return s.code() == ErrorCode::kInProgress ? drive() : s;
}

Status QuorumLock::begin_release() {
  if (op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  op_ = Op::kRelease;
  op_t0_ = clock().now();
  released_on_ = 0;
  if (!has_token_) return end_op(ErrorCode::kNotHeld);
  granted_ = false;  // whatever the servers say, we stop using it now
  release_any_ = false;
  if (start_release_round(Stage::kRelease)) return ErrorCode::kInProgress;
  return after_release(nullptr);
}

Status QuorumLock::after_release(const detail::FanoutResult* fr) {
  const size_t deleted = release_end(fr);
  Status s = ErrorCode::kIndeterminate;  // token kept: retry
  if (released_on_ >= quorum()) {
    forget();
    s = deleted > 0 ? Status() : Status(ErrorCode::kNotOwner);
  }
  return end_op(s);
}

// After an extend/owned round: servers that said "not ours" drop out.
// Returns how many servers may still hold our token.
size_t QuorumLock::note_owners(int64_t yes_min) {
  size_t possible = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (s.want && s.outcome == detail::SlotOutcome::kReplied && s.value < yes_min) {
      maybe_holds_[i] = false;
    }
    possible += maybe_holds_[i] ? 1 : 0;
  }
  return possible;
}

Status QuorumLock::finish_extend(TimePoint start, TimePoint decided_at, Millis ttl,
                                 ExtendMode mode) {
  const detail::FanoutGoal goal{quorum(), 1};
  const detail::Tally t = detail::tally_of(slots_, n_, goal);
  const size_t possible = note_owners(1);
  if (t.yes >= quorum() && detail::still_valid(valid_until_, decided_at)) {
    int64_t shortest = kMaxTtl.count();
    for (size_t i = 0; i < n_; ++i) {
      const detail::FanoutSlot& s = slots_[i];
      if (s.want && s.outcome == detail::SlotOutcome::kReplied && s.value > 0 &&
          s.value < shortest) {
        shortest = s.value;
      }
    }
    valid_until_ = detail::validity_end(start, Millis(shortest), options_.drift_factor);
    if (held()) return Status();
    granted_ = false;  // extended to less than the drift allowance: ok needs validity
    return ErrorCode::kExpired;
  }
  // Not decided: the request may have landed on some servers. A replace
  // may have shortened their TTL (an add only lengthens it), so the
  // validity is what either could leave: the old one or the new request's.
  if (mode == ExtendMode::kReplace) {
    valid_until_ = detail::least_end(valid_until_, start, ttl, options_.drift_factor);
  }
  const ErrorCode e = detail::keep_failure(t, possible);
  if (e == ErrorCode::kNotOwner || !held()) {
    granted_ = false;
    return e == ErrorCode::kNotOwner ? e : ErrorCode::kExpired;
  }
  return e;
}

Status QuorumLock::extend(Millis ttl, ExtendMode mode) { return run(begin_extend(ttl, mode)); }

Status QuorumLock::start_extend(Millis ttl, ExtendMode mode) {
  const Status s = begin_extend(ttl, mode);
  return s.code() == ErrorCode::kInProgress ? drive() : s;
}

Status QuorumLock::renew() { return extend(options_.ttl, ExtendMode::kReplace); }

Status QuorumLock::start_renew() { return start_extend(options_.ttl, ExtendMode::kReplace); }

Status QuorumLock::begin_extend(Millis ttl, ExtendMode mode) {
  if (op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  op_ = Op::kExtend;
  op_t0_ = clock().now();
  const Status s = extend_request(ttl, mode);
  if (s.code() == ErrorCode::kInProgress) return s;
  return end_op(s);
}

Status QuorumLock::extend_request(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_) return ErrorCode::kNotHeld;
  if (!held()) {
    granted_ = false;
    return ErrorCode::kExpired;  // too late to extend: acquire again
  }
  ms_text_.set(detail::ms_arg(ttl));
  extend_args_[1] = ms_text_.bytes();
  extend_args_[2] = Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set");
  ext_ttl_ = ttl;
  ext_mode_ = mode;
  want_holders(true, op_t0_);
  const detail::FanoutRequest req{{&detail::kExtendScript, {keys_, 1}, {extend_args_, 3}}};
  // The round stops at the end of the current validity.
  return begin_round(Stage::kExtend, req, {quorum(), 1},
                     round_deadline(Deadline::at(valid_until_)));
}

Status QuorumLock::after_extend(const detail::FanoutResult& fr) {
  note_servers(fr.decided_at, fr.timed_out);
  const Status s = finish_extend(op_t0_, fr.decided_at, ext_ttl_, ext_mode_);
  return end_op(s);
}

Result<bool> QuorumLock::owned() { return detail::owned_of(run(begin_check())); }

Status QuorumLock::start_owned() {
  const Status s = begin_check();
  return s.code() == ErrorCode::kInProgress ? drive() : s;
}

Status QuorumLock::begin_check() {
  if (!has_token_) return ErrorCode::kNotHeld;
  if (op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  op_ = Op::kCheck;
  op_t0_ = clock().now();
  want_holders(true, op_t0_);
  // kOwnedScript: the key's PTTL (>= -1) if ours, -3 if not.
  const detail::FanoutRequest req{{&detail::kOwnedScript, keys_, {acquire_args_, 1}}};
  return begin_round(Stage::kCheck, req, {quorum(), -2}, round_deadline(Deadline::never()));
}

Status QuorumLock::after_check(const detail::FanoutResult& fr) {
  note_servers(fr.decided_at, fr.timed_out);
  const detail::Tally t = detail::tally_of(slots_, n_, round_.goal);
  const size_t possible = note_owners(-2);
  if (t.yes >= quorum()) return end_op(Status());
  const ErrorCode e = detail::keep_failure(t, possible);
  if (e == ErrorCode::kNotOwner) granted_ = false;
  return end_op(e);
}

}  // namespace edgelock
