// Waiting in a FairLock's queue without polling: block on our wake list
// (BLPOP, woken by the release that makes it our turn) for at most the holder's remaining
// TTL (or the dead head's deadline) and half the waiter timeout, so the
// next attempt renews our place before it lapses. Capped backoff when no
// signal can be waited for.
#include "blpop_timeout.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/fair_lock.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

}  // namespace

bool FairLock::pause(Status last, Nanos left, Deadline op_deadline, Status* attempted) {
  // Our place lapses after waiter_timeout without an attempt: wait at most
  // half of it, so a renewal delayed by the network still lands in time.
  const Nanos renew_by = min_of(Nanos(options_.waiter_timeout) / 2, left);
  // Blocking needs a busy answer with a time limit: a holder without TTL
  // (hint 0) gets plain backoff.
  const bool can_block =
      wake_supported_ && last.code() == ErrorCode::kBusy && hint_ > Millis(0) && seq_ != 0;
  if (can_block) {
    Nanos cap = min_of(hint_ + Millis(1), renew_by);
    // The pipelined attempt's validity counts from before the BLPOP: block
    // at most a quarter of the TTL so it can always ride along (only on a
    // plain connection: Sentinel and Cluster pick the node per command).
    // Short TTLs cost a renewal round per TTL / 4 while waiting, not a
    // second round trip per handoff.
    const bool pipelined = core_.backend().direct() != nullptr;
    if (pipelined) cap = min_of(cap, Nanos(options_.ttl) / 4);
    if (await_turn(cap, pipelined, op_deadline, attempted)) return true;
  }
  clock().sleep_for(min_of(core_.backoff_delay(last, left), renew_by));
  return false;
}

// Blocks on our wake list for up to `cap`. With `pipelined` the attempt
// rides along: Redis runs it the moment the BLPOP returns, so the grant
// comes one round trip after the release, as for Lock. Returns true with the attempt's status in
// *attempted, false (no attempt made) if the caller should sleep instead:
// BLPOP refused, connection trouble, cap under 1 ms.
bool FairLock::await_turn(Nanos cap, bool pipelined, Deadline op_deadline, Status* attempted) {
  const detail::BlpopTimeout secs(cap);
  if (secs.len == 0) return false;
  detail::CompanionKey wake;  // "{key}:w:<seq_>": where we wait
  if (!wake_key_of(seq_, &wake).ok()) return false;
  const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), wake.bytes(), secs.bytes()};
  // BLPOP holds the connection for up to `cap`: the reply's budget is that
  // plus one ordinary command timeout.
  const Deadline d = Deadline::after(clock(), cap + core_.command_timeout()).min(op_deadline);
  if (pipelined) {
    *attempted = attempt(d, true, blpop);
    return true;
  }
  const Result<const Reply*> r = core_.backend().command(key(), blpop, d);
  if (!r.ok()) {
    // Redis < 6 refuses a fractional timeout: stop trying on this lock.
    if (r.status().code() == ErrorCode::kServerError) wake_supported_ = false;
    return false;
  }
  // Signal (array) or timeout (nil): attempt now.
  *attempted = attempt(core_.io_deadline().min(op_deadline), true);
  return true;
}

}  // namespace edgelock
