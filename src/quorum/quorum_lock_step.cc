// Quorum lock: the start/step machine. An operation is a chain of stages
// (acquire round, fence round, clean-up round, pause; a release round; an
// extend round); each round is a fan-out kept in round_ and moved by
// step() without blocking. The blocking calls drive the same machine with
// the library's driver (run()), waiting on the sockets in flight (or
// sleeping out a pause).
#include "base/validity.h"
#include "connection/machine.h"
#include "edgelock/detail/lease_core.h"
#include "edgelock/quorum_lock.h"
#include "quorum/quorum_fanout.h"

namespace edgelock {

namespace {

// Stages one drive() call may pass: an attempt has at most three rounds
// and a pause.
constexpr int kMaxStages = 8;
// A deadline that has passed on every clock: "step now".
constexpr Deadline kNow = Deadline::at(TimePoint());

}  // namespace

Status QuorumLock::begin_round(Stage stage, const detail::FanoutRequest& req,
                               const detail::FanoutGoal& goal, Deadline deadline) {
  stage_ = stage;
  round_ = detail::FanoutRound{req, goal, deadline};
  detail::start_fanout(conns_, slots_, n_, round_, clock());
  return ErrorCode::kInProgress;
}

Status QuorumLock::end_op(Status s) {
  op_ = Op::kNone;
  stage_ = Stage::kNone;
  return s;
}

Status QuorumLock::step() {
  if (op_ == Op::kNone) return ErrorCode::kInvalidArgument;
  if (stage_ != Stage::kPause) detail::fanout_step(conns_, slots_, n_, round_, nullptr);
  return drive();
}

// Ends every round that is over and every pause that has passed, starting
// the next stage each time, until one is still going or the operation ends.
Status QuorumLock::drive() {
  Clock& c = clock();
  for (int i = 0; i < kMaxStages; ++i) {
    Status s;
    if (stage_ == Stage::kPause) {
      if (c.now() < resume_at_) return ErrorCode::kInProgress;
      s = next_attempt();
    } else {
      if (!detail::fanout_over(slots_, n_, round_, c)) return ErrorCode::kInProgress;
      s = round_done(detail::fanout_end(conns_, slots_, n_, round_, c));
    }
    if (s.code() != ErrorCode::kInProgress) return s;
  }
  return ErrorCode::kInProgress;
}

Status QuorumLock::round_done(const detail::FanoutResult& fr) {
  switch (stage_) {
    case Stage::kAcquire: return after_acquire(fr);
    case Stage::kFence: return after_fence(fr);
    case Stage::kCleanup: return after_cleanup(&fr);
    case Stage::kRelease: return after_release(&fr);
    case Stage::kExtend: return after_extend(fr);
    case Stage::kCheck: return after_check(fr);
    default: return end_op(ErrorCode::kInvalidArgument);
  }
}

// A blocking call: the library's driver (detail::run_machine) over this
// machine. Each turn waits only on the servers in flight and moves only
// those that are ready, as one poll(), or sleeps out a pause.
Status QuorumLock::run(Status s) {
  if (s.code() == ErrorCode::kInProgress) s = drive();
  const detail::Machine m{this, [](void* q) { return static_cast<QuorumLock*>(q)->drive(); },
                          [](void* q) { static_cast<QuorumLock*>(q)->await(); },
                          [](void* q) { static_cast<QuorumLock*>(q)->cancel(); }};
  return detail::run_machine(s, m);
}

void QuorumLock::await() {
  if (stage_ == Stage::kPause) {
    clock().sleep_for(resume_at_ - clock().now());
    return;
  }
  short ready[kMaxQuorumServers] = {};
  if (detail::fanout_await(conns_, slots_, n_, round_, clock(), ready)) {
    detail::fanout_step(conns_, slots_, n_, round_, ready);
  } else {
    round_.deadline = kNow;  // the wait itself failed: the round ends here
  }
}

size_t QuorumLock::wait_fds(pollfd* out, size_t cap) const {
  if (op_ == Op::kNone || stage_ == Stage::kPause || !out) return 0;
  bool buffered = false;
  return detail::fanout_wait_fds(conns_, slots_, n_, out, cap, &buffered);
}

Deadline QuorumLock::next_deadline() const {
  if (op_ == Op::kNone) return Deadline::never();
  if (stage_ == Stage::kPause) return Deadline::at(resume_at_);
  bool buffered = false;
  detail::fanout_wait_fds(conns_, slots_, n_, nullptr, 0, &buffered);
  // Bytes waiting where poll() cannot see them, or a round already decided.
  if (buffered || detail::fanout_over(slots_, n_, round_, clock())) return kNow;
  return round_.deadline.min(detail::fanout_step_deadline(conns_, slots_, n_));
}

// What was sent may have landed, so it counts as a round that ended
// without answers. The requests stay in flight: the next round queues its
// own behind them (a release after an extend runs after it), and reads
// their replies first.
void QuorumLock::cancel() {
  if (op_ == Op::kNone) return;
  switch (stage_) {
    case Stage::kAcquire:
      note_acquire();  // every server sent to may hold the token
      granted_ = false;
      fence_ = 0;
      break;
    case Stage::kFence:
    case Stage::kCleanup:
      granted_ = false;
      fence_ = 0;
      break;
    case Stage::kRelease:
      released_on_ = 0;
      for (size_t i = 0; i < n_; ++i) released_on_ += maybe_holds_[i] ? 0 : 1;
      break;
    case Stage::kExtend:
      // A replace may have shortened the TTL where it landed.
      if (ext_mode_ == ExtendMode::kReplace) {
        valid_until_ = detail::least_end(valid_until_, op_t0_, ext_ttl_, options_.drift_factor);
      }
      break;
    default: break;
  }
  end_op(ErrorCode::kTimeout).ignore();
}

}  // namespace edgelock
