// Connection: a command and an eval sent in one write, read back in order.
// The single-instance lock uses it to queue its acquire behind the BLPOP
// that waits for the release signal (docs/benchmarks.md, "Handoff"). A
// quorum lock queues a release behind a request still unanswered
// (pipeline_eval), so a frozen server runs both in order when it resumes.
#include "edgelock/connection.h"

namespace edgelock {

Result<const Reply*> Connection::command_then_eval(Span<const Bytes> args, const ScriptCall& call,
                                                   Deadline deadline, Status* first) {
  if (busy() || !first) return ErrorCode::kInvalidArgument;
  drop_if_stale();
  EDGELOCK_TRY(ensure_connected(deadline));
  set_eval(call);
  EDGELOCK_TRY(encode(args));
  EDGELOCK_TRY(encode_eval(true, tx_len_));
  EDGELOCK_TRY(begin());
  ++stats_.commands;  // two commands in this write
  replies_due_ = 2;
  const Result<const Reply*> r = wait(deadline);
  // A transport failure or a timeout closed the connection: the eval's
  // fate is unknown, like any lost reply. An error reply to the command
  // leaves the eval's reply still to come.
  if (!r.ok() && !is_connected()) return r.status();
  *first = r.ok() ? Status() : r.status();
  replies_due_ = 1;
  phase_ = Phase::kReceiving;
  return wait(deadline);
}

}  // namespace edgelock

namespace edgelock {

Status Connection::pipeline_eval(const ScriptCall& call) {
  // Only behind a request already written whole: the send buffer is then
  // free, and a TLS write in progress is never re-armed with other bytes.
  if (phase_ != Phase::kReceiving || !is_connected() || replies_due_ >= kMaxPipelined) {
    return ErrorCode::kInvalidArgument;
  }
  const ScriptCall call0 = eval_;  // no script after a plain command
  const bool sha0 = eval_by_sha_;
  set_eval(call);
  // By body: a NOSCRIPT for the earlier request must not re-send anything
  // (it would land after this one), and this one cannot get NOSCRIPT.
  const Status s = encode_eval(false);
  if (!s.ok()) {
    eval_ = call0;
    eval_by_sha_ = sha0;
    return s;
  }
  tx_sent_ = 0;
  ++replies_due_;
  ++stats_.commands;
  phase_ = Phase::kSending;
  return Status();
}

Result<const Reply*> Connection::advance_pipeline() {
  const bool was_sending = phase_ == Phase::kSending;
  Result<const Reply*> r = advance();
  // A pipelined request written whole just now: an earlier reply may
  // already wait unread (a lone request's reply is a round trip away).
  if (was_sending && replies_due_ > 1 && r.ok() && !r.value() && phase_ == Phase::kReceiving) {
    r = advance();
  }
  if (r.ok() && !r.value()) return r;
  if (replies_due_ > 1 && is_connected()) {
    // An earlier reply of the pipeline: the last one is still due.
    --replies_due_;
    phase_ = Phase::kReceiving;
  }
  return r;
}

}  // namespace edgelock
