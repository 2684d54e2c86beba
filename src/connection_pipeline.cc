// Connection: a command and an eval sent in one write, read back in order.
// The single-instance lock uses it to queue its acquire behind the BLPOP
// that waits for the release signal (docs/benchmarks.md, "Handoff").
#include "edgelock/connection.h"

namespace edgelock {

Result<const Reply*> Connection::command_then_eval(const Bytes* args, size_t count,
                                                   const Script& script, const Bytes* keys,
                                                   size_t nkeys, const Bytes* eval_args,
                                                   size_t nargs, Deadline deadline,
                                                   Status* first) {
  if (busy() || !first) return ErrorCode::kInvalidArgument;
  drop_if_stale();
  EDGELOCK_TRY(ensure_connected(deadline));
  set_eval(script, keys, nkeys, eval_args, nargs);
  EDGELOCK_TRY(encode(args, count));
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
