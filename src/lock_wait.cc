// Waiting for a busy lock without polling: block on the release signal
// (BLPOP on "{key}:wake") for at most the holder's remaining TTL; fall back
// to capped, jittered backoff when no signal can be waited for.
#include <cstdio>

#include "edgelock/detail/connection_io.h"
#include "edgelock/lock.h"
#include "lock_scripts.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

}  // namespace

Nanos Lock::retry_delay(Status last, Nanos left) {
  Nanos delay = backoff_.next(rng_);
  // A busy lock frees by expiry at the latest: no point sleeping past it.
  // A holder without TTL (reported as 0) gets the plain backoff: capping at
  // 1 ms would poll it a thousand times a second.
  const Nanos expiry = busy_ttl_ + Millis(1);
  if (last.code() == ErrorCode::kBusy && busy_ttl_ > Millis(0) && expiry < delay) delay = expiry;
  return min_of(delay, left);
}

bool Lock::pause(Status last, Nanos left, Deadline op_deadline, Status* attempted) {
  // Blocking needs a holder whose key expires (busy_ttl_ > 0): a key
  // without TTL, or one expiring this millisecond, gets plain backoff.
  const bool can_block = options_.wake_on_release && wake_supported_ &&
                         last.code() == ErrorCode::kBusy && busy_ttl_ > Millis(0);
  if (can_block) {
    const Nanos half = options_.wake_fallback / 2;
    Nanos cap = rng_.uniform(half, options_.wake_fallback);
    cap = min_of(min_of(cap, busy_ttl_ + Millis(1)), left);  // a crashed holder frees by then
    // The pipelined attempt's validity counts from before the BLPOP: only
    // worth it while the wait can cost at most a quarter of the TTL. Only
    // on a plain connection: Sentinel and Cluster pick the node per command.
    if (conn_ && cap * 4 <= options_.ttl) {
      if (await_and_attempt(cap, op_deadline, attempted)) return true;
    } else if (await_release(cap, op_deadline)) {
      return false;
    }
  }
  clock().sleep_for(retry_delay(last, left));
  return false;
}

namespace {

// BLPOP's timeout in seconds with ms precision ("1.250"), rounded down so
// the server gives up before our own deadline does. 0 if under 1 ms.
size_t blpop_timeout(Nanos cap, char (&out)[32]) {
  const int64_t ms = std::chrono::floor<Millis>(cap).count();
  if (ms < 1) return 0;
  const int n = std::snprintf(out, sizeof out, "%lld.%03lld", static_cast<long long>(ms / 1000),
                              static_cast<long long>(ms % 1000));
  return n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace

// Returns true if it waited (signal or timeout), false if the caller
// should sleep instead (BLPOP refused, connection trouble, cap < 1 ms).
bool Lock::await_release(Nanos cap, Deadline op_deadline) {
  char secs[32];
  const size_t n = blpop_timeout(cap, secs);
  if (n == 0) return false;
  const Bytes args[3] = {Bytes::from_cstr("BLPOP"), Bytes(wake_key_, wake_key_len_), Bytes(secs, n)};
  // BLPOP holds the connection for up to `cap`: the reply's budget is that
  // plus one ordinary command timeout.
  const Deadline d = Deadline::after(clock(), cap + command_timeout()).min(op_deadline);
  const Result<const Reply*> r = run_command(args, d);
  if (r.ok()) return true;  // signal (array) or timeout (nil): retry now
  // Redis < 6 refuses a fractional timeout: stop trying on this lock.
  if (r.status().code() == ErrorCode::kServerError) wake_supported_ = false;
  return false;
}

// BLPOP and the acquire in one write: Redis runs the acquire the moment the
// BLPOP returns (signal or timeout), so the grant reaches us one round trip
// after the release instead of two. Returns true with the attempt's status
// in *attempted, false (nothing sent) if the cap is under 1 ms.
bool Lock::await_and_attempt(Nanos cap, Deadline op_deadline, Status* attempted) {
  char secs[32];
  const size_t n = blpop_timeout(cap, secs);
  if (n == 0) return false;
  const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), Bytes(wake_key_, wake_key_len_), Bytes(secs, n)};
  const Bytes keys[3] = {key(), Bytes(fence_key_, fence_key_len_), Bytes(wake_key_, wake_key_len_)};
  const Bytes args[2] = {token(), Bytes(ttl_text_, ttl_text_len_)};
  const Deadline d = Deadline::after(clock(), cap + command_timeout()).min(op_deadline);
  const TimePoint start = clock().now();  // the acquire may run any time after this
  has_token_ = true;                  // a lost reply may mean the key is ours
  Status first;
  const Result<const Reply*> r =
      detail::io(*conn_).command_then_eval(blpop, {&detail::kAcquireScript, keys, args, true}, d, &first);
  if (first.code() == ErrorCode::kServerError) wake_supported_ = false;
  *attempted = noted(EventKind::kAcquire, start, on_acquire_reply(r, start));
  return true;
}

}  // namespace edgelock
