// Waiting for a busy lock without polling: block on the release signal
// (BLPOP on "{key}:wake") for at most the holder's remaining TTL; fall back
// to capped, jittered backoff when no signal can be waited for.
#include <cstdio>

#include "edgelock/lock.h"

namespace edgelock {

namespace {

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

}  // namespace

Nanos Lock::retry_delay(Status last, Nanos left) {
  Nanos delay = backoff_.next(rng_);
  // A busy lock frees by expiry at the latest: no point sleeping past it.
  if (last.code() == ErrorCode::kBusy && millis(busy_ttl_ms_ + 1) < delay) {
    delay = millis(busy_ttl_ms_ + 1);
  }
  return min_of(delay, left);
}

void Lock::pause(Status last, Nanos left, Deadline op_deadline) {
  // Blocking needs a holder whose key expires (busy_ttl_ms_ > 0): a key
  // without TTL, or one expiring this millisecond, gets plain backoff.
  const bool can_block = options_.wake_on_release && wake_supported_ &&
                         last.code() == ErrorCode::kBusy && busy_ttl_ms_ > 0;
  if (can_block) {
    const Nanos half = options_.wake_fallback / 2;
    Nanos cap = rng_.uniform(half, options_.wake_fallback);
    cap = min_of(cap, millis(busy_ttl_ms_ + 1));  // a crashed holder frees by then
    if (await_release(min_of(cap, left), op_deadline)) return;
  }
  clock().sleep_for(retry_delay(last, left));
}

// Returns true if it waited (signal or timeout), false if the caller
// should sleep instead (BLPOP refused, connection trouble, cap < 1 ms).
bool Lock::await_release(Nanos cap, Deadline op_deadline) {
  // Rounded down: the server must give up before our own deadline does.
  const int64_t ms = to_millis(cap);
  if (ms < 1) return false;
  char secs[32];
  const int n = std::snprintf(secs, sizeof secs, "%lld.%03lld", static_cast<long long>(ms / 1000),
                              static_cast<long long>(ms % 1000));
  const Bytes args[3] = {Bytes::from_cstr("BLPOP"), Bytes(wake_key_, wake_key_len_),
                         Bytes(secs, static_cast<size_t>(n))};
  // BLPOP holds the connection for up to `ms`: the reply's budget is that
  // plus one ordinary command timeout.
  const Deadline d = Deadline::after(clock(), millis(ms) + command_timeout()).min(op_deadline);
  const Result<const Reply*> r = run_command(args, 3, d);
  if (r.ok()) return true;  // signal (array) or timeout (nil): retry now
  // Redis < 6 refuses a fractional timeout: stop trying on this lock.
  if (r.status().code() == ErrorCode::kServerError) wake_supported_ = false;
  return false;
}

}  // namespace edgelock
