#pragma once
// The Lua scripts behind RateLimiter (private). KEYS[1] = the limiter's
// key; its TTL (on the server's clock) is the window. The decision answers
// {allowed, remaining, pttl} (detail::RateGate).

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// ARGV[1] = M, ARGV[2] = window ms. Returns {allowed, remaining, pttl}.
// Refused attempts do not count: the counter never goes above M. A key
// left without a TTL (set by hand) is given one, never a window that lasts
// forever.
constexpr Script kRateScript = make_script(
    "local m = tonumber(ARGV[1])\n"
    "local n = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "local ok = 0\n"
    "if n < m then\n"
    "  n = redis.call('INCR', KEYS[1])\n"
    "  ok = 1\n"
    "end\n"
    "local t = redis.call('PTTL', KEYS[1])\n"
    "if t < 0 then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  t = tonumber(ARGV[2])\n"
    "end\n"
    "return {ok, m - n, t}\n");

// Returns the key's PTTL (-2 absent, -1 no TTL) and its count (0 if absent).
constexpr Script kRatePeekScript = make_script(
    "return {redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[1]) or '0')}\n");

}  // namespace detail
}  // namespace edgelock
