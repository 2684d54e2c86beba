#pragma once
// The Lua scripts behind ReentrantLock (private). KEYS[1] = hash
// {owner, handle, depth, fence}; KEYS[2] = fencing counter (same hash
// slot). "Ours" means owner id AND handle nonce match: the depth belongs to
// one handle. Every script checks that and changes the hash atomically.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// ARGV[1] = owner, ARGV[2] = ttl ms, ARGV[3] = depth wanted after the call,
// ARGV[4] = handle nonce, ARGV[5] = the most levels we may hold already
// (requests whose outcome we never learnt). Returns {depth, fence} when
// granted: a hash of ours at any depth from want - 1 to ARGV[5] is set to
// want and re-armed to max(its PTTL, ttl) (never shorter: a retry given up
// on may run after a longer extend), so a retry whose grant already landed
// is not counted twice. {0, pttl} when someone else holds it and we hold
// nothing, {-1, 0} when we held levels and the key is gone or someone
// else's, {-2, depth} when our depth is outside that range. Checks before
// it writes: a fence counter that is not a count below 2^53 (beyond, Lua
// numbers would give two grants one fence) or of the wrong type is an error
// reply, nothing written.
// Kept short: after a SCRIPT FLUSH its EVAL must fit the command buffer.
constexpr Script kReentrantAcquireScript = make_script(
    "local call, k, w = redis.call, KEYS[1], tonumber(ARGV[3])\n"
    "local h = call('HMGET', k, 'owner', 'handle', 'depth', 'fence')\n"
    "if not h[1] then\n"
    "if w ~= 1 then return {-1, 0} end\n"
    "local c = tonumber(call('GET', KEYS[2]) or '0')\n"
    "if not c or c < 0 or c >= 2^53 then\n"
    "return redis.error_reply('ERR bad fence counter') end\n"
    "local f = call('INCR', KEYS[2])\n"
    "call('HSET', k, 'owner', ARGV[1], 'handle', ARGV[4], 'depth', 1, 'fence', f)\n"
    "call('PEXPIRE', k, ARGV[2])\n"
    "return {1, f}\n"
    "end\n"
    "if h[1] ~= ARGV[1] or h[2] ~= ARGV[4] then\n"
    "if w > 1 then return {-1, 0} end\n"
    "return {0, math.max(call('PTTL', k), 0)}\n"
    "end\n"
    "local d, f = tonumber(h[3]), tonumber(h[4])\n"
    "if not d or not f or d < w - 1 or d > tonumber(ARGV[5]) then return {-2, d or 0} end\n"
    "call('HSET', k, 'depth', w)\n"
    "if call('PTTL', k) < tonumber(ARGV[2]) then call('PEXPIRE', k, ARGV[2]) end\n"
    "return {w, f}\n");

// ARGV[1] = owner, ARGV[2] = depth wanted after the call, ARGV[3] = ttl ms,
// ARGV[4] = handle nonce, ARGV[5] = the most levels we may hold. A hash of
// ours at any depth from want to ARGV[5] is set to want (0: deleted) and
// otherwise re-armed to at least ARGV[3] (never cut: a release given up on
// may run after a later extend): a retry whose release landed re-arms the
// TTL it reports. Returns the new depth, -1 if not ours, -2 if our depth is
// outside that range.
constexpr Script kReentrantReleaseScript = make_script(
    "local h = redis.call('HMGET', KEYS[1], 'owner', 'handle', 'depth')\n"
    "if h[1] ~= ARGV[1] or h[2] ~= ARGV[4] then return -1 end\n"
    "local w, d = tonumber(ARGV[2]), tonumber(h[3])\n"
    "if not d or d < w or d > tonumber(ARGV[5]) then return -2 end\n"
    "if w == 0 then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "  return 0\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'depth', w)\n"
    "if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "end\n"
    "return w\n");

// ARGV[1] = owner, ARGV[2] = ms, ARGV[3] = handle nonce. Returns ms if
// ours (TTL raised to at least ms, never cut: an extend given up on may
// run after a later, longer one), else 0.
constexpr Script kReentrantExtendScript = make_script(
    "if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] or\n"
    "   redis.call('HGET', KEYS[1], 'handle') ~= ARGV[3] then return 0 end\n"
    "if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "end\n"
    "return tonumber(ARGV[2])\n");

}  // namespace detail
}  // namespace edgelock
