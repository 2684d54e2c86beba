#pragma once
// The Lua scripts behind a lock (private), shared by single and quorum
// locks. Each is one atomic step on the server; the owner check and the
// change happen together, so a stale holder can never touch a new holder's
// key. KEYS[1] = lock key, KEYS[2] = fencing counter (same hash slot).
// The lock key is read with pcall: a key of another type (a hash-based
// lock of another library, say) is another holder, so acquire says busy and
// release, extend and owned say not ours, instead of a WRONGTYPE error.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// ARGV[1] = token, ARGV[2] = ttl ms. Returns the new fencing token (1 ..
// 2^53 - 1: beyond, a Lua number rounds and two grants could share a fence,
// so a counter that reaches 2^53 refuses every grant, lock key unset),
// or -(holder's PTTL) (<= 0; 0 also for a holder without TTL) when busy.
// Retrying with our own token after a lost reply is safe: it re-arms our
// key instead of failing as busy, to max(its PTTL, ttl). Never shorter: a
// retry given up on may run after a longer extend succeeded and must not
// undo it (the client counts the acquire's ttl, no more than the server
// keeps; a key of ours without TTL gets ttl). All or nothing: the only
// write that can fail (INCR: counter of the wrong type, not an integer, or
// at INT64_MAX; or OOM / READONLY at the first write) comes first, and its
// failure is the server's error reply (its code kept) naming the fence
// counter, with nothing written.
// Optional KEYS[3] = the wake list: a grant clears any leftover release
// signal, since the lock is no longer free (it would only cause a spurious
// wake-up; our own release will signal again). DEL works on any type.
constexpr Script kAcquireScript = make_script(
    "local cur = redis.pcall('GET', KEYS[1])\n"
    "local px = ARGV[2]\n"
    "if cur then\n"
    "  local t = redis.call('PTTL', KEYS[1])\n"
    "  if cur ~= ARGV[1] then\n"
    "    if t < 0 then t = 0 end\n"
    "    return -t\n"
    "  end\n"
    "  if t > tonumber(ARGV[2]) then px = t end\n"
    "end\n"
    "local f = redis.pcall('INCR', KEYS[2])\n"
    "if type(f) == 'table' then\n"
    "  return redis.error_reply(tostring(f.err) .. ' (edgelock fence counter)')\n"
    "end\n"
    "if f >= 2^53 then return redis.error_reply('ERR edgelock fence counter at 2^53') end\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', px)\n"
    "if KEYS[3] then redis.call('DEL', KEYS[3]) end\n"
    "return f\n");

// The quorum lock's acquire (the one-round fencing of docs/quorum.md).
// ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = the client's proposed fence
// f (decimal, >= 1). On a grant the counter becomes max(counter + 1, f),
// atomically with the SET, and is returned (>= 1). Busy: {-(holder's PTTL)
// (<= 0; 0 also for a holder without TTL), the counter (0 if none or not an
// integer)}, so a waiter learns where the counter stands. The counter only
// ever grows. Same-token retries re-arm (never shorter), as kAcquireScript.
// All or nothing: the counter write (INCR, or SET to f when f is further
// ahead; the only writes that can fail, with the server's error naming the
// fence counter) comes before the lock key is written. A counter that is
// not an integer (or of another type) is left to INCR, which refuses it.
constexpr Script kQuorumAcquireScript = make_script(
    "local cur = redis.pcall('GET', KEYS[1])\n"
    "local c = redis.pcall('GET', KEYS[2])\n"
    "local n = 0\n"
    "if c then n = type(c) == 'string' and string.find(c, '^%-?%d+$') and tonumber(c) end\n"
    "local px = ARGV[2]\n"
    "if cur then\n"
    "  local t = redis.call('PTTL', KEYS[1])\n"
    "  if cur ~= ARGV[1] then\n"
    "    if t < 0 then t = 0 end\n"
    "    return {-t, n or 0}\n"
    "  end\n"
    "  if t > tonumber(ARGV[2]) then px = t end\n"
    "end\n"
    "local f = tonumber(ARGV[3])\n"
    "if (n and n >= 9007199254740991) or not f or f >= 9007199254740991 then\n"
    "  return redis.error_reply('ERR edgelock fence counter at 2^53 - 1')\n"
    "end\n"
    "local r\n"
    "if n and f and f > n + 1 then\n"
    "  r = redis.pcall('SET', KEYS[2], ARGV[3])\n"
    "  c = f\n"
    "else\n"
    "  r = redis.pcall('INCR', KEYS[2])\n"
    "  c = r\n"
    "end\n"
    "if type(r) == 'table' and r.err then\n"
    "  return redis.error_reply(tostring(r.err) .. ' (edgelock fence counter)')\n"
    "end\n"
    "redis.call('SET', KEYS[1], ARGV[1], 'PX', px)\n"
    "return c\n");

// ARGV[1] = token. Returns 1 if deleted, 0 if not ours (left alone).
// With KEYS[2] (the wake list, same hash slot) and ARGV[2] (its TTL in ms)
// it also leaves one wake signal there: a waiter blocked in BLPOP on it
// gets the lock handed over at once instead of polling. The list never
// grows: grants delete it, LTRIM keeps one signal should two releases meet
// without a grant between them (adopt()), and PEXPIRE drops a signal
// nobody waited for. All or nothing: the only write that can fail (LPUSH
// on a wake key of another type) comes first; such a key just gets no
// signal (waiters fall back to their caps) and the delete still happens.
// Called with one key it is a plain owner-checked delete (quorum locks).
constexpr Script kReleaseScript = make_script(
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "if KEYS[2] and type(redis.pcall('LPUSH', KEYS[2], '1')) == 'number' then\n"
    "  redis.call('LTRIM', KEYS[2], 0, 0)\n"
    "  redis.call('PEXPIRE', KEYS[2], ARGV[2])\n"
    "end\n"
    "redis.call('DEL', KEYS[1])\n"
    "return 1\n");

// ARGV[1] = token, ARGV[2] = ms, ARGV[3] = 'add' (PTTL + ms) or 'set'
// (max(PTTL, ms)). Returns the new TTL in ms (> 0), or 0 if not ours.
// Never shorter: an extend given up on may run after a later, longer one
// (docs/late-requests.md), so no extend can cut a lease short.
constexpr Script kExtendScript = make_script(
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "local ttl = tonumber(ARGV[2])\n"
    "local p = redis.call('PTTL', KEYS[1])\n"
    "if ARGV[3] == 'add' then\n"
    "  if p > 0 then ttl = ttl + p end\n"
    "elseif p > ttl then\n"
    "  return p\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[1], ttl)\n"
    "return ttl\n");

// ARGV[1] = token. Returns the key's PTTL if ours (-1: no expiry), else -3.
constexpr Script kOwnedScript = make_script(
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return -3 end\n"
    "return redis.call('PTTL', KEYS[1])\n");

// Quorum fencing write-back, sent only when fewer than a majority returned
// the fence (see quorum_lock.h). ARGV[1] = token, ARGV[2] = fence. Raises
// the counter to the fence if lower, but only while the lock key still
// holds our token: the next holder's grant on this server then comes after
// the raise and its max(counter + 1, f) exceeds the fence. Returns 1 if
// ours (counter now >= fence), 0 if not ours.
constexpr Script kFenceRaiseScript = make_script(
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "local cur = tonumber(redis.call('GET', KEYS[2]) or '0') or 0\n"
    "if tonumber(ARGV[2]) > cur then redis.call('SET', KEYS[2], ARGV[2]) end\n"
    "return 1\n");

}  // namespace detail
}  // namespace edgelock
