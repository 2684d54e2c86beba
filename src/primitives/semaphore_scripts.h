#pragma once
// The Lua scripts behind Semaphore (private). KEYS[1] = sorted set of
// permit id -> expiry (ms, server clock). Every script reads the server's
// TIME, drops expired permits, then acts: the count check and the ZADD are
// one atomic step. The key's own TTL follows its latest permit.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// Each Lua line on its own line, as the script reads.
// clang-format off

#define EDGELOCK_SEM_PRELUDE                                              \
  "local t = redis.call('TIME')\n"                                       \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
  "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"

#define EDGELOCK_SEM_KEEP_KEY                                             \
  "local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')\n"   \
  "if last[2] then redis.call('PEXPIRE', KEYS[1], tonumber(last[2]) - now + 1) end\n"

// ARGV[1] = permit id, ARGV[2] = ttl ms, ARGV[3] = N. Returns {1, in use}
// when granted (also when the id already holds a permit: a retry after a
// lost reply re-arms it, its expiry max(old, now + ttl): never shorter, as
// a retry given up on may run after a longer extend succeeded), else
// {0, ms until the first permit expires}, or {-1, 0} for an empty id
// (every client sending one would share a permit).
constexpr Script kSemAcquireScript = make_script(
    "if ARGV[1] == '' then return {-1, 0} end\n"
    EDGELOCK_SEM_PRELUDE
    "local exp = now + tonumber(ARGV[2])\n"
    "local old = redis.call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if old then\n"
    "  exp = math.max(exp, tonumber(old))\n"
    "elseif redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then\n"
    "  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "  return {0, tonumber(first[2]) - now}\n"
    "end\n"
    "redis.call('ZADD', KEYS[1], exp, ARGV[1])\n"
    EDGELOCK_SEM_KEEP_KEY
    "return {1, redis.call('ZCARD', KEYS[1])}\n");

// ARGV[1] = permit id. Returns 1 if released, 0 if it had expired/was unknown.
constexpr Script kSemReleaseScript = make_script(
    EDGELOCK_SEM_PRELUDE
    "return redis.call('ZREM', KEYS[1], ARGV[1])\n");

// ARGV[1] = permit id, ARGV[2] = ms. Returns ms if extended, 0 if gone.
// The expiry becomes max(old, now + ms): never shorter, as an extend given
// up on may run after a later, longer one.
constexpr Script kSemExtendScript = make_script(
    EDGELOCK_SEM_PRELUDE
    "local old = redis.call('ZSCORE', KEYS[1], ARGV[1])\n"
    "if not old then return 0 end\n"
    "redis.call('ZADD', KEYS[1], 'XX', math.max(now + tonumber(ARGV[2]), tonumber(old)), ARGV[1])\n"
    EDGELOCK_SEM_KEEP_KEY
    "return tonumber(ARGV[2])\n");

// Returns the number of unexpired permits.
constexpr Script kSemCountScript = make_script(
    EDGELOCK_SEM_PRELUDE
    "return redis.call('ZCARD', KEYS[1])\n");

#undef EDGELOCK_SEM_PRELUDE
#undef EDGELOCK_SEM_KEEP_KEY

// clang-format on

}  // namespace detail
}  // namespace edgelock
