// Quorum lock: release, extend, owned, and per-server bookkeeping.
#include <cstring>

#include "edgelock/quorum_lock.h"
#include "duration.h"
#include "lock_scripts.h"
#include "quorum_fanout.h"
#include "quorum_math.h"

namespace edgelock {

bool QuorumLock::server_down(size_t i) const {
  return i < n_ && clock().now() < servers_[i].down_until;
}

const char* QuorumLock::last_error() const {
  return last_failed_ < n_ ? conns_[last_failed_]->last_error() : "";
}

Status QuorumLock::noted(EventKind kind, TimePoint start, Status s) {
  metrics_.record(kind, s, clock().now() - start);
  return s;
}

// A server that answered is up; one we could not reach, or that let a whole
// round pass in silence, is skipped for a doubling backoff. A request merely
// left in flight because the round was decided early says nothing.
void QuorumLock::note_servers(TimePoint now, bool timed_out) {
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    Server& srv = servers_[i];
    if (!s.want) continue;
    if (s.outcome == detail::SlotOutcome::kReplied) {
      srv.down_step = Nanos::zero();
      srv.down_until = TimePoint();
      continue;
    }
    if (s.in_flight && !timed_out) continue;  // left behind by an early decision
    last_failed_ = i;
    if (s.outcome == detail::SlotOutcome::kFailed && s.sent) continue;  // error reply: it is up
    const Nanos step = srv.down_step == Nanos::zero() ? options_.down_min : srv.down_step * 2;
    srv.down_step = step < options_.down_max ? step : options_.down_max;
    srv.down_until = now + srv.down_step;
  }
}

void QuorumLock::want_holders(bool skip_down, TimePoint now) {
  for (size_t i = 0; i < n_; ++i) {
    slots_[i].want = servers_[i].maybe_holds && !(skip_down && now < servers_[i].down_until);
  }
}

// Releases on every server that may hold our token, waiting for all of
// them within one deadline of server_timeout for the whole round. On a
// server still working on an earlier request the release is queued behind
// it (it runs after that request, even if the round ends first). Returns
// how many deleted our key; released_on_ = servers known not to hold it.
size_t QuorumLock::release_round() {
  Clock& c = clock();
  const Deadline deadline = Deadline::after(c, server_timeout_);  // before any I/O
  want_holders(false, TimePoint());
  size_t deleted = 0;
  bool any = false;
  for (size_t i = 0; i < n_; ++i) any = any || slots_[i].want;
  if (any) {
    detail::FanoutRequest req{{&detail::kReleaseScript, {keys_, 1}, {token_args_, 1}}};
    req.pipeline = true;
    const detail::FanoutGoal goal{quorum(), 1, true};
    const detail::FanoutResult fr = detail::run_fanout(conns_, slots_, n_, req, goal, deadline, c);
    note_servers(fr.decided_at, fr.timed_out);
  }
  released_on_ = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (any && s.want && s.outcome == detail::SlotOutcome::kReplied) {
      servers_[i].maybe_holds = false;
      deleted += s.value == 1 ? 1 : 0;
    }
    released_on_ += servers_[i].maybe_holds ? 0 : 1;
  }
  return deleted;
}

void QuorumLock::cleanup() {
  release_round();
  granted_ = false;
  fence_ = 0;
  bool left = false;
  for (size_t i = 0; i < n_; ++i) left = left || servers_[i].maybe_holds;
  has_token_ = left;
}

// Released on a majority is released: no other client can be kept from a
// majority by what is left, and each straggler has the release queued
// behind its last request, or frees the key when its TTL ends.
Status QuorumLock::release() {
  const TimePoint t0 = clock().now();
  return noted(EventKind::kRelease, t0, send_release());
}

Status QuorumLock::send_release() {
  released_on_ = 0;
  if (!has_token_) return ErrorCode::kNotHeld;
  granted_ = false;  // whatever the servers say, we stop using it now
  const size_t deleted = release_round();
  if (released_on_ < quorum()) return ErrorCode::kIndeterminate;  // token kept: retry
  forget();
  return deleted > 0 ? Status() : Status(ErrorCode::kNotOwner);
}

// After an extend/owned round: servers that said "not ours" drop out.
// Returns how many servers may still hold our token.
size_t QuorumLock::note_owners(int64_t yes_min) {
  size_t possible = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (s.want && s.outcome == detail::SlotOutcome::kReplied && s.value < yes_min) {
      servers_[i].maybe_holds = false;
    }
    possible += servers_[i].maybe_holds ? 1 : 0;
  }
  return possible;
}

Status QuorumLock::finish_extend(TimePoint start, TimePoint decided_at, Millis ttl,
                                 ExtendMode mode) {
  const detail::FanoutGoal goal{quorum(), 1, false};
  const detail::Tally t = detail::tally_of(slots_, n_, goal);
  const size_t possible = note_owners(1);
  if (t.yes >= quorum() && detail::still_valid(valid_until_, decided_at)) {
    int64_t shortest = kMaxTtl.count();
    for (size_t i = 0; i < n_; ++i) {
      const detail::FanoutSlot& s = slots_[i];
      if (s.want && s.outcome == detail::SlotOutcome::kReplied && s.value > 0 && s.value < shortest) {
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

Status QuorumLock::extend(Millis ttl, ExtendMode mode) {
  const TimePoint t0 = clock().now();
  return noted(EventKind::kExtend, t0, send_extend(ttl, mode));
}

Status QuorumLock::send_extend(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_) return ErrorCode::kNotHeld;
  if (!held()) {
    granted_ = false;
    return ErrorCode::kExpired;  // too late to extend: acquire again
  }
  Clock& c = clock();
  ms_text_.set(detail::ms_arg(ttl));
  extend_args_[1] = ms_text_.bytes();
  std::memcpy(mode_text_, mode == ExtendMode::kAdd ? "add" : "set", 4);
  extend_args_[2] = Bytes(mode_text_, 3);
  const TimePoint start = c.now();
  want_holders(true, start);
  const detail::FanoutRequest req{{&detail::kExtendScript, {keys_, 1}, {extend_args_, 3}}};
  const detail::FanoutGoal goal{quorum(), 1, false};
  const detail::FanoutResult fr = detail::run_fanout(
      conns_, slots_, n_, req, goal, round_deadline(Deadline::at(valid_until_)), c);
  note_servers(fr.decided_at, fr.timed_out);
  return finish_extend(start, fr.decided_at, ttl, mode);
}

Status QuorumLock::renew() { return extend(options_.ttl, ExtendMode::kReplace); }

Result<bool> QuorumLock::owned() {
  if (!has_token_) return ErrorCode::kNotHeld;
  Clock& c = clock();
  want_holders(true, c.now());
  // kOwnedScript: the key's PTTL (>= -1) if ours, -3 if not.
  const detail::FanoutRequest req{{&detail::kOwnedScript, {keys_, 1}, {token_args_, 1}}};
  const detail::FanoutGoal goal{quorum(), -2, false};
  const detail::FanoutResult fr =
      detail::run_fanout(conns_, slots_, n_, req, goal, round_deadline(Deadline::never()), c);
  note_servers(fr.decided_at, fr.timed_out);
  const detail::Tally t = detail::tally_of(slots_, n_, goal);
  const size_t possible = note_owners(-2);
  if (t.yes >= quorum()) return true;
  const ErrorCode e = detail::keep_failure(t, possible);
  if (e != ErrorCode::kNotOwner) return e;
  granted_ = false;
  noted(EventKind::kCheck, c.now(), ErrorCode::kNotOwner).ignore();
  return false;
}

}  // namespace edgelock
