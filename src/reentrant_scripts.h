#pragma once
// The Lua scripts behind ReentrantLock (private). KEYS[1] = hash
// {owner, depth, fence}; KEYS[2] = fencing counter (same hash slot).
// Every script checks the owner and changes the hash in one atomic step.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// ARGV[1] = owner, ARGV[2] = ttl ms, ARGV[3] = depth wanted after the call.
// Returns {depth, fence} when granted (a retry whose grant already landed
// finds depth == wanted and only re-arms the TTL), {0, pttl} when another
// owner holds it, {-1, 0} when we expected to hold it and the key is gone,
// {-2, depth} when our depth changed under us.
constexpr Script kReentrantAcquireScript = make_script(
    "local want = tonumber(ARGV[3])\n"
    "local o = redis.call('HGET', KEYS[1], 'owner')\n"
    "if o == false then\n"
    "  if want ~= 1 then return {-1, 0} end\n"
    "  local f = redis.call('INCR', KEYS[2])\n"
    "  redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'depth', 1, 'fence', f)\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return {1, f}\n"
    "end\n"
    "if o ~= ARGV[1] then\n"
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
// ARGV[3] = ttl ms. Returns the new depth (0: key deleted), -1 if not ours,
// -2 if the depth is not the one we hold.
constexpr Script kReentrantReleaseScript = make_script(
    "if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return -1 end\n"
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

// ARGV[1] = owner, ARGV[2] = ms. Returns ms if ours (TTL reset), else 0.
constexpr Script kReentrantExtendScript = make_script(
    "if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "return tonumber(ARGV[2])\n");

}  // namespace detail
}  // namespace edgelock
