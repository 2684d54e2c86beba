#pragma once
// The Lua scripts behind ReentrantLock (private). KEYS[1] = hash
// {owner, handle, depth, fence}; KEYS[2] = fencing counter (same hash
// slot). "Ours" means owner id AND handle nonce match: the depth belongs to
// one handle. Every script checks that and changes the hash atomically.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// ARGV[1] = owner, ARGV[2] = ttl ms, ARGV[3] = depth wanted after the call,
// ARGV[4] = handle nonce. Returns {depth, fence} when granted (a retry
// whose grant already landed finds depth == wanted and only re-arms the
// TTL), {0, pttl} when someone else holds it and we hold nothing, {-1, 0}
// when we held levels and the key is gone or someone else's, {-2, depth}
// when our depth changed under us.
constexpr Script kReentrantAcquireScript = make_script(
    "local want = tonumber(ARGV[3])\n"
    "local o = redis.call('HGET', KEYS[1], 'owner')\n"
    "if o == false then\n"
    "  if want ~= 1 then return {-1, 0} end\n"
    "  local f = redis.call('INCR', KEYS[2])\n"
    "  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'handle', ARGV[4], 'depth', 1, 'fence', f)\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, f}\n"
    "end\n"
    "if o ~= ARGV[1] or redis.call('HGET', KEYS[1], 'handle') ~= ARGV[4] then\n"
    "  if want > 1 then return {-1, 0} end\n"
    "  local t = redis.call('PTTL', KEYS[1])\n"
    "  if t < 0 then t = 0 end\n"
    "  return {0, t}\n"
    "end\n"
    "local d = tonumber(redis.call('HGET', KEYS[1], 'depth'))\n"
    "if d == want - 1 then\n"
    "  d = redis.call('HINCRBY', KEYS[1], 'depth', 1)\n"
    "elseif d ~= want then\n"
    "  return {-2, d}\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return {d, tonumber(redis.call('HGET', KEYS[1], 'fence'))}\n");

// ARGV[1] = owner, ARGV[2] = depth wanted after the call (held - 1),
// ARGV[3] = ttl ms, ARGV[4] = handle nonce. Returns the new depth (0: key
// deleted), -1 if not ours, -2 if the depth is not the one we hold.
constexpr Script kReentrantReleaseScript = make_script(
    "if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or\n"
    "   redis.call('HGET', KEYS[1], 'handle') ~= ARGV[4] then return -1 end\n"
    "local want = tonumber(ARGV[2])\n"
    "local d = tonumber(redis.call('HGET', KEYS[1], 'depth'))\n"
    "if d == want then return want end\n"
    "if d ~= want + 1 then return -2 end\n"
    "if want == 0 then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  return 0\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'depth', want)\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "return want\n");

// ARGV[1] = owner, ARGV[2] = ms, ARGV[3] = handle nonce. Returns ms if
// ours (TTL reset), else 0.
constexpr Script kReentrantExtendScript = make_script(
    "if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or\n"
    "   redis.call('HGET', KEYS[1], 'handle') ~= ARGV[3] then return 0 end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return tonumber(ARGV[2])\n");

}  // namespace detail
}  // namespace edgelock
