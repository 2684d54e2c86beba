// Waiting for a busy lock without polling: block on the release signal
// (BLPOP on "{key}:wake") for at most the holder's remaining TTL; fall back
// to capped, jittered backoff when no signal can be waited for. Both are
// steps of the acquire's machine (lock.cc): a request in flight or a
// pause, never a sleep.
#include "base/lock_keys.h"
#include "edgelock/lock.h"
#include "primitives/blpop_timeout.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

using detail::blpop_timeout;

}  // namespace

// The pause after a retryable failure `last`, with `left` of the wait:
// the release signal (BLPOP, with the attempt pipelined behind it on a
// plain connection), or a backoff pause. Returns kInProgress.
Status Lock::next_attempt(Status last, Nanos left) {
  last_ = last;
  // Blocking needs a holder whose key expires (busy_ttl > 0): a key
  // without TTL, or one expiring this millisecond, gets plain backoff.
  const Millis busy_ttl = core_.busy_ttl();
  // On a connection other handles share, BLPOP would hold it from them.
  const bool can_block = options_.wake_on_release && wake_supported_ && !core_.shared() &&
                         last.code() == ErrorCode::kBusy && busy_ttl > Millis(0);
  if (can_block) {
    const Nanos half = options_.wake_fallback / 2;
    Nanos cap = core_.rng().uniform(half, options_.wake_fallback);
    cap = min_of(min_of(cap, busy_ttl + Millis(1)), left);  // a crashed holder frees by then
    // A plain command is written whole when it starts (never encoded
    // again), so its words may live here.
    detail::DecimalText secs;
    detail::CompanionKey wake;
    if (blpop_timeout(cap, &secs) && wake.set(key(), detail::kWakeSuffix).ok()) {
      const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), wake.bytes(), secs.bytes()};
      // BLPOP holds the connection for up to `cap`: the reply's budget is
      // that plus one ordinary command timeout.
      const Deadline d =
          Deadline::after(clock(), cap + core_.command_timeout()).min(core_.attempts_until());
      // BLPOP and the acquire in one write: Redis runs the acquire the
      // moment the BLPOP returns (signal or timeout), so the grant reaches
      // us one round trip after the release instead of two. Its validity
      // counts from before the BLPOP: only worth it while the wait can cost
      // at most a quarter of the TTL. On Sentinel and Cluster both go to
      // the key's node (a back end that cannot route sends them apart).
      if (core_.pipelines() && cap * 4 <= options_.ttl) return start_attempt(d, blpop);
      req_ = Req::kBlpop;
      return core_.send_command(blpop, d);
    }
  }
  return core_.pause(core_.backoff_delay(last, left));
}

// The BLPOP alone came back: signal (array) or timeout (nil) means try
// now; an error means back off instead.
Status Lock::on_blpop(const Result<const Reply*>& r) {
  if (r.ok()) return start_attempt(core_.attempt_deadline());
  // Redis < 6 refuses a fractional timeout: stop trying on this lock.
  if (r.status().code() == ErrorCode::kServerError) wake_supported_ = false;
  return core_.pause(core_.backoff_delay(last_, core_.wait_left()));
}

}  // namespace edgelock
