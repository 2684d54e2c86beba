// Quorum lock: release, extend, owned, and per-server bookkeeping.
#include <cstdio>
#include <cstring>

#include "edgelock/quorum_lock.h"
#include "lock_scripts.h"
#include "quorum_fanout.h"
#include "quorum_math.h"

namespace edgelock {

bool QuorumLock::server_down(size_t i) const {
  return i < n_ && clock().now() < servers_[i].down_until;
}

const char* QuorumLock::connection_error() const {
  return last_failed_ < n_ ? conns_[last_failed_]->last_error() : "";
}

// A server that answered is up; one we could not reach, or that let a whole
// round pass in silence, is skipped for a doubling backoff. A request merely
// left in flight because the round was decided early says nothing.
void QuorumLock::note_servers(Nanos now, bool timed_out) {
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    Server& srv = servers_[i];
    if (!s.want) continue;
    if (s.outcome == detail::SlotOutcome::kReplied) {
      srv.down_step = 0;
      srv.down_until = 0;
      continue;
    }
    if (s.in_flight && !timed_out) continue;  // left behind by an early decision
    last_failed_ = i;
    if (s.outcome == detail::SlotOutcome::kFailed && s.sent) continue;  // error reply: it is up
    const Nanos step = srv.down_step == 0 ? options_.down_min : srv.down_step * 2;
    srv.down_step = step < options_.down_max ? step : options_.down_max;
    srv.down_until = now + srv.down_step;
  }
}

void QuorumLock::want_holders(bool skip_down, Nanos now) {
  for (size_t i = 0; i < n_; ++i) {
    slots_[i].want = servers_[i].maybe_holds && !(skip_down && now < servers_[i].down_until);
  }
}

// Releases on every server that may hold our token, waiting for all of
// them (up to the per-server budget). Returns how many deleted our key.
size_t QuorumLock::release_round() {
  Clock& c = clock();
  want_holders(false, 0);
  bool any = false;
  for (size_t i = 0; i < n_; ++i) any = any || slots_[i].want;
  if (!any) return 0;
  const detail::FanoutRequest req{&detail::kReleaseScript, keys_, 1, token_args_, 1};
  const detail::FanoutGoal goal{quorum(), 1, true};
  const detail::FanoutResult fr =
      detail::run_fanout(conns_, slots_, n_, req, goal, Deadline::after(c, server_timeout_), c);
  note_servers(fr.decided_at, fr.timed_out);
  size_t deleted = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (!s.want || s.outcome != detail::SlotOutcome::kReplied) continue;
    servers_[i].maybe_holds = false;
    deleted += s.value == 1 ? 1 : 0;
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

Status QuorumLock::release() {
  if (!has_token_) return ErrorCode::kNotHeld;
  granted_ = false;  // whatever the servers say, we stop using it now
  const size_t deleted = release_round();
  for (size_t i = 0; i < n_; ++i) {
    if (servers_[i].maybe_holds) return ErrorCode::kIndeterminate;
  }
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

Status QuorumLock::finish_extend(Nanos start, Nanos decided_at) {
  const detail::FanoutGoal goal{quorum(), 1, false};
  const detail::Tally t = detail::tally_of(slots_, n_, goal);
  const size_t possible = note_owners(1);
  if (t.yes >= quorum() && detail::still_valid(valid_until_, decided_at)) {
    int64_t shortest = kMaxTtlMs;
    for (size_t i = 0; i < n_; ++i) {
      const detail::FanoutSlot& s = slots_[i];
      if (s.want && s.outcome == detail::SlotOutcome::kReplied && s.value > 0 && s.value < shortest) {
        shortest = s.value;
      }
    }
    valid_until_ = detail::validity_end(start, shortest, options_.drift_factor);
    return Status();
  }
  const ErrorCode e = detail::keep_failure(t, possible);
  if (e == ErrorCode::kNotOwner || remaining() <= 0) {
    granted_ = false;
    return e == ErrorCode::kNotOwner ? e : ErrorCode::kExpired;
  }
  return e;
}

Status QuorumLock::extend(int64_t ms, ExtendMode mode) {
  if (ms < 1 || ms > kMaxTtlMs) return ErrorCode::kInvalidArgument;
  if (!has_token_) return ErrorCode::kNotHeld;
  if (remaining() <= 0) {
    granted_ = false;
    return ErrorCode::kExpired;  // too late to extend: acquire again
  }
  Clock& c = clock();
  const int len = std::snprintf(ms_text_, sizeof ms_text_, "%lld", static_cast<long long>(ms));
  extend_args_[1] = Bytes(ms_text_, static_cast<size_t>(len));
  std::memcpy(mode_text_, mode == ExtendMode::kAdd ? "add" : "set", 4);
  extend_args_[2] = Bytes(mode_text_, 3);
  const Nanos start = c.now();
  want_holders(true, start);
  const detail::FanoutRequest req{&detail::kExtendScript, keys_, 1, extend_args_, 3};
  const detail::FanoutGoal goal{quorum(), 1, false};
  const detail::FanoutResult fr = detail::run_fanout(
      conns_, slots_, n_, req, goal, round_deadline(Deadline::at(valid_until_)), c);
  note_servers(fr.decided_at, fr.timed_out);
  return finish_extend(start, fr.decided_at);
}

Status QuorumLock::reacquire() { return extend(options_.ttl_ms, ExtendMode::kReplace); }

Result<bool> QuorumLock::owned() {
  if (!has_token_) return ErrorCode::kNotHeld;
  Clock& c = clock();
  want_holders(true, c.now());
  // kOwnedScript: the key's PTTL (>= -1) if ours, -3 if not.
  const detail::FanoutRequest req{&detail::kOwnedScript, keys_, 1, token_args_, 1};
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
  return false;
}

}  // namespace edgelock
