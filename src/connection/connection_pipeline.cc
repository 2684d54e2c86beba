// Connection: requests queued behind the one in flight (one write, the
// server runs them in order even if a reply is never read), and the
// scripts this stream has seen run, which decide when a queued request may
// go by SHA-1.
#include "edgelock/connection.h"
#include "edgelock/detail/connection_io.h"

namespace edgelock {

Status Connection::pipeline_eval(const ScriptCall& call) {
  // Only behind a request already written whole: the send buffer is then
  // free, and a TLS write in progress is never re-armed with other bytes.
  if (state_ != State::kReceiving || replies_due_ >= detail::ConnectionIo::kMaxPipelined) {
    return ErrorCode::kInvalidArgument;
  }
  const ScriptCall call0 = eval_;  // no script after a plain command
  const bool sha0 = eval_by_sha_;
  eval_ = call;
  // By body: a NOSCRIPT for the earlier request must not re-send anything
  // (it would land after this one), and this one cannot get NOSCRIPT.
  const Status s = encode_eval(false, 0);
  if (!s.ok()) {
    eval_ = call0;  // refused: the request in flight goes on as it was
    eval_by_sha_ = sha0;
    return s;
  }
  tx_sent_ = 0;
  ++replies_due_;
  ++stats_.commands;
  state_ = State::kSending;
  return Status();
}

// Scripts this stream's server has run: a request may be queued behind
// one of them sent by SHA-1, as it cannot come back NOSCRIPT (short of a
// SCRIPT FLUSH), and so never needs a re-send that would land out of order.
void Connection::note_loaded(const Reply* reply) {
  // Only a reply the script itself made proves it (an error may come
  // before the lookup: LOADING, BUSY, NOPERM).
  const Script* ran = head_sha_ ? head_sha_ : (replies_due_ == 1 ? eval_.script : nullptr);
  head_sha_ = nullptr;
  if (reply->type == ReplyType::kError || !ran || script_loaded(ran) ||
      loaded_n_ == kLoadedScripts) {
    return;
  }
  loaded_[loaded_n_++] = ran;
}

bool Connection::script_loaded(const Script* script) const {
  for (uint8_t i = 0; i < loaded_n_; ++i) {
    if (loaded_[i] == script) return true;
  }
  return false;
}

}  // namespace edgelock
