// Quorum lock: set-up, and the acquire's stages (acquire round, fencing
// write-back round, clean-up, pause) of the start/step machine
// (quorum_lock_step.cc).
#include "edgelock/quorum_lock.h"

#include <cstring>

#include "base/duration.h"
#include "base/lock_keys.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/detail/lease_core.h"
#include "primitives/lock_scripts.h"
#include "quorum/quorum_fanout.h"
#include "quorum/quorum_math.h"

namespace edgelock {

namespace {

constexpr size_t kTokenRandomBytes = 16;  // 128 bits -> 32 hex chars
// KEYS[2] of the acquire and the fence raise: the fence counter.
constexpr Bytes kFenceCompanion[1] = {detail::kFenceSuffix};
// The fence proposed to every server is one above the highest counter seen
// for this key, capped so its text stays an exact Lua number.
constexpr uint64_t kMaxProposal = static_cast<uint64_t>(1) << 53;

// Outcomes of a round worth another round within the wait: those the error
// table calls retryable (a round returns only kBusy and kExpired of them:
// the servers' own errors stay in their slots), and the two only a quorum
// has: too few grants (kNoQuorum) and grants of unknown outcome, released
// again (kIndeterminate). The next round uses a new token.
bool round_retryable(ErrorCode c) {
  return traits(c).retryable || c == ErrorCode::kNoQuorum || c == ErrorCode::kIndeterminate;
}

bool valid_connections(Connection* const* conns, size_t n) {
  if (!conns || n == 0 || n > kMaxQuorumServers) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!conns[i] || &conns[i]->clock() != &conns[0]->clock()) return false;
    for (size_t j = 0; j < i; ++j) {
      if (conns[j] == conns[i]) return false;
    }
  }
  return true;
}

bool valid_options(const QuorumOptions& o) {
  return o.ttl >= Millis(1) && o.ttl <= kMaxTtl && o.drift_factor >= 0.0 && o.drift_factor <= 0.5 &&
         o.server_timeout >= Nanos::zero() && o.server_timeout < o.ttl &&
         o.retry_min > Nanos::zero() && o.retry_max >= o.retry_min && o.retry_max <= kMaxTtl &&
         o.down_min > Nanos::zero() && o.down_max >= o.down_min && o.down_max <= kMaxTtl &&
         o.ttl > detail::drift_of(o.ttl, o.drift_factor);  // some validity
}

// ttl / 50, at least 5 ms (but below the TTL).
Nanos default_server_timeout(Millis ttl) {
  const Nanos t = Nanos(ttl) / 50;
  if (t >= Millis(5)) return t;
  return Nanos(ttl) / 2 < Millis(5) ? Nanos(ttl) / 2 : Millis(5);
}

}  // namespace

Nanos QuorumLock::server_timeout() const {
  if (n_ == 0) return Nanos::zero();  // before init()
  return options_.server_timeout > Nanos::zero() ? options_.server_timeout
                                                 : default_server_timeout(options_.ttl);
}

QuorumLock::QuorumLock() = default;

QuorumLock::~QuorumLock() { abandon_in_flight(); }

Clock& QuorumLock::clock() const { return n_ > 0 ? conns_[0]->clock() : default_clock(); }

void QuorumLock::abandon_in_flight() {
  for (size_t i = 0; i < n_; ++i) {
    detail::ConnectionIo io = detail::io(*conns_[i]);
    if (io.busy()) io.abandon().ignore();
  }
}

Status QuorumLock::init(Connection* const* conns, size_t n, Bytes key,
                        const QuorumOptions& options) {
  if (op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  if (!valid_connections(conns, n) || !valid_options(options)) return ErrorCode::kInvalidArgument;
  if (key.size == 0 || key.size > kMaxKeyLen || !key.data) return ErrorCode::kInvalidArgument;
  if (detail::companion_length(key, detail::kFenceSuffix) > detail::kMaxCompanionLen) {
    return ErrorCode::kInvalidArgument;
  }
  EDGELOCK_TRY(rng_.seed_from_os());
  abandon_in_flight();  // requests of an earlier init() are of no use now
  for (size_t i = 0; i < n; ++i) conns_[i] = conns[i];
  n_ = static_cast<uint8_t>(n);
  options_ = options;
  std::memcpy(key_, key.data, key.size);
  seen_ = 0;  // counters of another key say nothing
  keys_[0] = Bytes(key_, key.size);
  acquire_args_[0] = token();
  ttl_text_.set(detail::ms_arg(options.ttl));
  acquire_args_[1] = ttl_text_.bytes();
  acquire_args_[2] = propose_text_.bytes();
  extend_args_[0] = token();
  fence_args_[0] = token();
  for (size_t i = 0; i < kMaxQuorumServers; ++i) {
    down_until_[i] = TimePoint();
    down_level_[i] = 0;
  }
  forget();
  return Status();
}

void QuorumLock::forget() {
  has_token_ = false;
  granted_ = false;
  valid_until_ = TimePoint();
  fence_ = 0;
  for (size_t i = 0; i < n_; ++i) maybe_holds_[i] = false;
}

Nanos QuorumLock::remaining() const {
  if (!granted_ || acquiring()) return Nanos::zero();
  const Nanos left = valid_until_ - clock().now();
  return left > Nanos::zero() ? left : Nanos::zero();
}

bool QuorumLock::valid_now() const { return granted_ && clock().now() < valid_until_; }

// --- The blocking calls: the start/step machine driven to its end.

Status QuorumLock::try_acquire() { return run(begin_try()); }
Status QuorumLock::start_try_acquire() {
  const Status s = begin_try();
  return s.code() == ErrorCode::kInProgress ? drive() : s;
}
Status QuorumLock::acquire(Nanos wait) { return run(begin_acquire(wait)); }
Status QuorumLock::start_acquire(Nanos wait) {
  const Status s = begin_acquire(wait);
  return s.code() == ErrorCode::kInProgress ? drive() : s;
}

// --- Acquire: a round, the fence write-back round, or the clean-up round
// after a failure; with a wait, a pause and another attempt.

Status QuorumLock::begin_try() {
  if (n_ == 0 || held() || op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  op_ = Op::kTry;
  attempts_ = 0;
  return first_attempt();
}

Status QuorumLock::begin_acquire(Nanos wait) {
  if (n_ == 0 || held() || op_ != Op::kNone) return ErrorCode::kInvalidArgument;
  op_ = Op::kAcquire;
  wait_until_ = Deadline::after(clock(), wait);
  attempts_ = 0;
  return first_attempt();
}

// The first attempt has a fresh token and no limit but its own round's.
Status QuorumLock::first_attempt() {
  forget();
  const Status s = random_hex(token_, kTokenRandomBytes);
  if (!s.ok()) return end_op(s);
  return start_attempt(Deadline::never());
}

Status QuorumLock::start_attempt(Deadline limit) {
  has_token_ = true;  // from here a lost reply may mean a key is ours
  granted_ = false;
  attempt_start_ = clock().now();  // before the first request leaves
  propose_text_.set(static_cast<int64_t>(seen_ < kMaxProposal ? seen_ + 1 : kMaxProposal));
  acquire_args_[2] = propose_text_.bytes();
  for (size_t i = 0; i < n_; ++i) slots_[i].want = attempt_start_ >= down_until_[i];
  const detail::FanoutRequest req{
      {&detail::kQuorumAcquireScript, keys_, acquire_args_, false, kFenceCompanion}};
  return begin_round(Stage::kAcquire, req, {quorum(), 1},
                     round_deadline(limit).min(Deadline::at(attempt_end())));
}

Status QuorumLock::after_acquire(const detail::FanoutResult& fr) {
  note_servers(fr.decided_at, fr.timed_out);
  note_acquire();
  const detail::Tally t = detail::tally_of(slots_, n_, {quorum(), 1});
  if (t.yes < quorum()) return cleanup(detail::acquire_failure(t));
  if (!detail::still_valid(attempt_end(), fr.decided_at)) return cleanup(ErrorCode::kExpired);
  granted_ = true;
  valid_until_ = attempt_end();
  // A majority that returned the fence itself already holds it (each set
  // its counter to it with our key in place): final after one round.
  // Otherwise the others are raised to it first.
  agreed_ = static_cast<uint8_t>(agreed_on_fence());
  if (options_.fencing && agreed_ < quorum()) return start_fence();
  if (!options_.fencing) fence_ = 0;
  return valid_now() ? attempt_done(Status()) : cleanup(ErrorCode::kExpired);
}

// Records what the acquire round left behind: who may hold our token, the
// highest fence counter among the grants, the highest counter seen at all
// (grants and busy replies), and busy_ttl_.
void QuorumLock::note_acquire() {
  fence_ = 0;
  int64_t ttls[kMaxQuorumServers];
  size_t busy = 0;
  size_t granted = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    if (!s.want) continue;
    const bool replied = s.outcome == detail::SlotOutcome::kReplied;
    // A busy reply is {-(holder's PTTL), counter}; PTTL 0 = no TTL (or
    // expiring now): no bound.
    if (replied && s.value < 0) ttls[busy++] = -s.value;
    if (replied && s.value <= 0 && s.aux > 0 && static_cast<uint64_t>(s.aux) > seen_) {
      seen_ = static_cast<uint64_t>(s.aux);
    }
    if (replied && s.value <= 0) continue;
    if (s.sent) maybe_holds_[i] = true;
    if (replied) ++granted;
    if (replied && static_cast<uint64_t>(s.value) > fence_) fence_ = static_cast<uint64_t>(s.value);
  }
  if (fence_ > seen_) seen_ = fence_;
  // Capped: a longer TTL (Redis takes centuries) would overflow the waits.
  const Millis free_in =
      Millis(detail::majority_free_ms(ttls, busy, granted < quorum() ? quorum() - granted : 0));
  busy_ttl_ = free_in < kMaxTtl ? free_in : kMaxTtl;
}

// Servers whose grant returned exactly fence_ (the maximum).
size_t QuorumLock::agreed_on_fence() const {
  size_t n = 0;
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    const bool replied = s.want && s.outcome == detail::SlotOutcome::kReplied;
    n += replied && s.value > 0 && static_cast<uint64_t>(s.value) == fence_ ? 1 : 0;
  }
  return n;
}

// The write-back round (docs/quorum.md): the agreed_ servers hold fence_
// already; raise the counter to fence_ on the other servers that may hold
// our key, each only while it still holds our token. fence_ counts once
// the agreed and the confirmed make a majority.
Status QuorumLock::start_fence() {
  fence_text_.set(static_cast<int64_t>(fence_));
  fence_args_[1] = fence_text_.bytes();
  // Every other server that may hold our key, not only the granting ones:
  // a grant whose reply was still on its way counts too (the script checks
  // ownership), so this round waits for the fastest of them.
  for (size_t i = 0; i < n_; ++i) {
    const detail::FanoutSlot& s = slots_[i];
    const bool at_fence = s.want && s.outcome == detail::SlotOutcome::kReplied && s.value > 0 &&
                          static_cast<uint64_t>(s.value) == fence_;
    slots_[i].want = maybe_holds_[i] && !at_fence;
  }
  const detail::FanoutRequest req{
      {&detail::kFenceRaiseScript, keys_, fence_args_, false, kFenceCompanion}};
  return begin_round(Stage::kFence, req, {quorum() - agreed_, 1},
                     round_deadline(round_limit()).min(Deadline::at(valid_until_)));
}

Status QuorumLock::after_fence(const detail::FanoutResult& fr) {
  note_servers(fr.decided_at, fr.timed_out);
  const detail::Tally t = detail::tally_of(slots_, n_, {quorum() - agreed_, 1});
  Status s;
  if (!detail::still_valid(valid_until_, fr.decided_at)) {
    s = ErrorCode::kExpired;
  } else if (agreed_ + t.yes < quorum()) {
    s = t.unknown > 0 ? ErrorCode::kIndeterminate : ErrorCode::kNoQuorum;
  }
  if (s.ok() && valid_now()) return attempt_done(s);
  return cleanup(s.ok() ? Status(ErrorCode::kExpired) : s);
}

// After a failed attempt: release on every server that may hold the token
// (start_release_round()); the attempt then ends with `then`.
Status QuorumLock::cleanup(Status then) {
  then_ = then;
  if (start_release_round(Stage::kCleanup)) return ErrorCode::kInProgress;
  return after_cleanup(nullptr);
}

Status QuorumLock::after_cleanup(const detail::FanoutResult* fr) {
  release_end(fr);
  granted_ = false;
  fence_ = 0;
  bool left = false;
  for (size_t i = 0; i < n_; ++i) left = left || maybe_holds_[i];
  has_token_ = left;
  return attempt_done(then_);
}

Status QuorumLock::attempt_done(Status s) {
  if (op_ != Op::kAcquire || s.ok() || !round_retryable(s.code()) || ++attempts_ >= 1000000) {
    return end_op(s);
  }
  Clock& c = clock();
  // The backoff's step is the failed attempts before this one.
  Nanos delay = Backoff(options_.retry_min, options_.retry_max, attempts_ - 1).next(rng_);
  // A majority frees by expiry then at the latest; with no such bound (a
  // holder without TTL) the normal backoff stands.
  // Compared in ms: a holder's TTL in ns may not fit (centuries are allowed).
  if (s.code() == ErrorCode::kBusy && busy_ttl_ > Millis(0) &&
      busy_ttl_ < std::chrono::floor<Millis>(delay)) {
    delay = busy_ttl_ + Millis(1);
  }
  const Nanos left = wait_until_.remaining(c);
  if (left <= Nanos::zero()) return end_op(s);
  stage_ = Stage::kPause;
  resume_at_ = c.now() + (delay < left ? delay : left);
  return ErrorCode::kInProgress;
}

// After the pause: same token when nothing carrying it may still be on its
// way (a lost grant is then re-armed, not busy); otherwise a fresh one: a
// release left queued on a server (behind an unanswered acquire, or on a
// connection given up and reopened) could run after this attempt's grant
// there and delete it.
Status QuorumLock::next_attempt() {
  if (has_token_) {
    forget();
    const Status s = random_hex(token_, kTokenRandomBytes);
    if (!s.ok()) return end_op(s);
  }
  return start_attempt(limit());
}

}  // namespace edgelock
