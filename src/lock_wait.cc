// Waiting for a busy lock without polling: block on the release signal
// (BLPOP on "{key}:wake") for at most the holder's remaining TTL; fall back
// to capped, jittered backoff when no signal can be waited for.
#include "blpop_timeout.h"
#include "edgelock/lock.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

using detail::BlpopTimeout;

}  // namespace

bool Lock::pause(Status last, Nanos left, Deadline op_deadline, Status* attempted) {
  // Blocking needs a holder whose key expires (busy_ttl > 0): a key
  // without TTL, or one expiring this millisecond, gets plain backoff.
  const Millis busy_ttl = core_.busy_ttl();
  const bool can_block = options_.wake_on_release && wake_supported_ &&
                         last.code() == ErrorCode::kBusy && busy_ttl > Millis(0);
  if (can_block) {
    const Nanos half = options_.wake_fallback / 2;
    Nanos cap = core_.rng().uniform(half, options_.wake_fallback);
    cap = min_of(min_of(cap, busy_ttl + Millis(1)), left);  // a crashed holder frees by then
    // The pipelined attempt's validity counts from before the BLPOP: only
    // worth it while the wait can cost at most a quarter of the TTL. Only
    // on a plain connection: Sentinel and Cluster pick the node per command.
    if (core_.backend().direct() && cap * 4 <= options_.ttl) {
      if (await_and_attempt(cap, op_deadline, attempted)) return true;
    } else if (await_release(cap, op_deadline)) {
      return false;
    }
  }
  clock().sleep_for(core_.backoff_delay(last, left));
  return false;
}

// Returns true if it waited (signal or timeout), false if the caller
// should sleep instead (BLPOP refused, connection trouble, cap < 1 ms).
bool Lock::await_release(Nanos cap, Deadline op_deadline) {
  const BlpopTimeout secs(cap);
  if (secs.len == 0) return false;
  const Bytes args[3] = {Bytes::from_cstr("BLPOP"), wake_key_.bytes(), secs.bytes()};
  // BLPOP holds the connection for up to `cap`: the reply's budget is that
  // plus one ordinary command timeout.
  const Deadline d = Deadline::after(clock(), cap + core_.command_timeout()).min(op_deadline);
  const Result<const Reply*> r = core_.backend().command(key(), args, d);
  if (r.ok()) return true;  // signal (array) or timeout (nil): retry now
  // Redis < 6 refuses a fractional timeout: stop trying on this lock.
  if (r.status().code() == ErrorCode::kServerError) wake_supported_ = false;
  return false;
}

// BLPOP and the acquire in one write (plain connection only): Redis runs
// the acquire the moment the BLPOP returns (signal or timeout), so the
// grant reaches us one round trip after the release instead of two.
// Returns true with the attempt's status in *attempted, false (nothing
// sent) if the cap is under 1 ms.
bool Lock::await_and_attempt(Nanos cap, Deadline op_deadline, Status* attempted) {
  const BlpopTimeout secs(cap);
  if (secs.len == 0) return false;
  const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), wake_key_.bytes(), secs.bytes()};
  *attempted = attempt(Deadline::after(clock(), cap + core_.command_timeout()).min(op_deadline), blpop);
  return true;
}

}  // namespace edgelock
