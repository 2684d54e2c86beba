// Waiting in a FairLock's queue without polling: block on our wake list
// (BLPOP, woken by the release that makes it our turn) for at most the
// holder's remaining TTL (or the dead head's deadline) and half the waiter
// timeout, so the next attempt renews our place before it lapses. Capped
// backoff pauses when no signal can be waited for, or when other handles
// share the connection (a BLPOP would hold it from them). Both are steps
// of the acquire's machine (fair_lock.cc): a request in flight or a
// pause, never a sleep. Also the SCRIPT LOAD fallback of every request.
#include "edgelock/fair_lock.h"
#include "primitives/blpop_timeout.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

}  // namespace

// The pause after a retryable failure `last`, with `left` of the wait: our
// wake list (BLPOP, with the attempt pipelined behind it on a plain
// connection and in a start_*() operation on Sentinel or Cluster, where
// both go to the key's node), or a backoff pause. Returns kInProgress.
Status FairLock::next_attempt(Status last, Nanos left) {
  last_ = last;
  // Our place lapses after waiter_timeout without an attempt: wait at most
  // half of it, so a renewal delayed by the network still lands in time.
  const Nanos renew_by = min_of(Nanos(options_.waiter_timeout) / 2, left);
  // A BLPOP that just failed (a redirect, a demoted primary) would fail
  // again at once: one backoff pause first.
  const bool blpop_failed = blpop_failed_;
  blpop_failed_ = false;
  // Blocking needs a busy answer with a time limit: a holder without TTL
  // (hint 0) gets plain backoff, as does a shared connection.
  const bool can_block = wake_supported_ && !blpop_failed && !core_.shared() &&
                         last.code() == ErrorCode::kBusy && hint_ > Millis(0) && seq_ != 0;
  if (can_block) {
    Nanos cap = min_of(hint_ + Millis(1), renew_by);
    // The pipelined attempt's validity counts from before the BLPOP: block
    // at most a quarter of the TTL so it can always ride along. Short TTLs
    // cost a renewal round per TTL / 4 while waiting, not a second round
    // trip per handoff. A back end that cannot route (Backend::eval()
    // alone) gets the BLPOP by itself.
    const bool pipelined = core_.pipelines();
    if (pipelined) cap = min_of(cap, Nanos(options_.ttl) / 4);
    // A plain command is written whole when it starts (never encoded
    // again), so its words may live here.
    detail::DecimalText secs;
    detail::CompanionKey wake;  // "{key}:w:<seq_>": where we wait
    if (detail::blpop_timeout(cap, &secs) && wake.set(key(), WakeSuffix(seq_).bytes()).ok()) {
      const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), wake.bytes(), secs.bytes()};
      // BLPOP holds the connection for up to `cap`: the reply's budget is
      // that plus one ordinary command timeout.
      const Deadline d =
          Deadline::after(clock(), cap + core_.command_timeout()).min(core_.attempts_until());
      // Redis runs the attempt the moment the BLPOP returns, so the grant
      // comes one round trip after the release, as for Lock.
      if (pipelined) return start_attempt(d, blpop);
      req_ = Req::kBlpop;
      return core_.send_command(blpop, d);
    }
  }
  return core_.pause(min_of(core_.backoff_delay(last, left), renew_by));
}

// The BLPOP alone came back: signal (array) or timeout (nil) means try
// now; an error means back off instead.
Status FairLock::on_blpop(const Result<const Reply*>& r) {
  if (r.ok()) return start_attempt(core_.attempt_deadline());
  // Only a back end that routes by itself gets a BLPOP alone: there
  // an error may be a primary demoted under it (UNBLOCKED), not a server
  // that refuses BLPOP, so waits stay on. The back end learned where to go
  // next (a redirect, a lookup): the attempt after the pause goes there.
  const Nanos left = core_.wait_left();
  const Nanos renew_by = min_of(Nanos(options_.waiter_timeout) / 2, left);
  return core_.pause(min_of(core_.backoff_delay(last_, left), renew_by));
}

// The fair scripts are too long to re-send by body with long keys: when
// the server has lost them (NOSCRIPT) and the EVAL does not fit the
// command buffer, the connection refuses it unsent (kBufferTooSmall).
// SCRIPT LOAD carries the body without the keys (it always fits:
// eval_capacity.h), then the call goes again (without a BLPOP).
Status FairLock::load_script() {
  loaded_ = true;
  load_for_ = req_;
  req_ = Req::kLoad;
  const Bytes load[3] = {Bytes::from_cstr("SCRIPT"), Bytes::from_cstr("LOAD"),
                         Bytes(call_.script->body, call_.script->len)};
  return core_.send_command(load, call_deadline_);
}

Status FairLock::on_load(const Result<const Reply*>& r) {
  req_ = load_for_;
  Result<const Reply*> out = r;
  if (r.ok() && (r.value()->type != ReplyType::kString || r.value()->len != 40)) {
    out = core_.reject("SCRIPT LOAD wants a SHA-1");
  }
  // The request it was for ends with the load's error.
  if (!out.ok()) return on_result(out);
  return core_.send(call_, call_deadline_);
}

}  // namespace edgelock
