#pragma once
// The Lua scripts behind a FairLock (private). Each is one atomic step on
// the server. KEYS[1] = lock key (holds the holder's token, as for Lock),
// KEYS[2] = fencing counter (shared with Lock: fences stay monotonic when a
// key moves between the two), KEYS[3] = the queue, KEYS[4] = the turn list
// (the wake signal); all in one hash slot (lock_keys.h).
//
// The queue is one hash: a field "w:<token>" per waiter holding
// "<arrival seq>:<deadline>" (server ms), "seq" (the arrival counter) and
// "pass" (how often the current wake signal may still be passed on). One
// key keeps the EVALSHA, with a BLPOP pipelined before it, inside the
// command buffer at max_key_len (eval_capacity.h). Every script scans it
// (O(waiters)), so a queue holds one entry per waiting handle.
//
// Time is the server's own (TIME; scripts are effect-replicated). A waiter
// whose deadline passed (it crashed or stopped waiting) is dropped by the
// next script that looks, so a dead waiter delays the others by at most
// one waiter timeout.
//
// Waking only the head: waiters block on the turn list. A release leaves
// one signal there and allows 2 x waiters passes. BLPOP serves blocked
// waiters in the order they blocked, which in steady state is the queue
// order (each blocks right after joining), so the head gets it. If another
// waiter gets it first, its attempt (pipelined behind the BLPOP, so at
// once, on the server) finds the lock free with someone else at the head
// and passes the signal on. The budget ends the passing when the head is
// gone (crashed): the others then wake at its deadline, when it is dropped.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// Shared start of every fair script: `now`, the queue scan (drops expired
// or malformed entries; n = waiters left, last = latest deadline), the head
// (lowest seq, with its deadline hdue), tidy() (the queue key lives as long
// as its latest deadline) and signal() (one wake signal on the turn list;
// a turn key of another type gets none, so no write after it can fail).
#define EDGELOCK_FAIR_PRELUDE                                             \
  "local C, Q, T = redis.call, KEYS[3], KEYS[4]\n"                        \
  "local t = C('TIME')\n"                                                 \
  "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                    \
  "local all = C('HGETALL', Q)\n"                                         \
  "local seqs, n, last, head, hseq, hdue = {}, 0, 0, nil, nil, 0\n"       \
  "for i = 1, #all, 2 do\n"                                               \
  "if string.sub(all[i], 1, 2) == 'w:' then\n"                            \
  "local s, d = string.match(all[i + 1], '^(%d+):(%d+)$')\n"              \
  "s, d = tonumber(s), tonumber(d)\n"                                     \
  "if not d or d <= now then C('HDEL', Q, all[i]) else\n"                 \
  "local w = string.sub(all[i], 3)\n"                                     \
  "seqs[w], n = s, n + 1\n"                                               \
  "if d > last then last = d end\n"                                       \
  "if not hseq or s < hseq then head, hseq, hdue = w, s, d end\n"         \
  "end end end\n"                                                         \
  "local function tidy()\n"                                               \
  "if n <= 0 then C('DEL', Q) else C('PEXPIRE', Q, last - now + 1) end\n" \
  "end\n"                                                                 \
  "local function signal(ttl)\n"                                          \
  "if type(redis.pcall('LPUSH', T, '1')) == 'number' then\n"              \
  "C('LTRIM', T, 0, 0) C('PEXPIRE', T, ttl) end\n"                        \
  "end\n"

// ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = waiter timeout ms: positive
// to join (or stay in) the queue, negative to only try. Grants when the
// lock is free and nobody is queued ahead (or the key already holds our
// token: a retry after a lost reply re-arms it) and returns the new fence
// (>= 1), leaving the queue. Otherwise returns {wait_ms, position}:
// wait_ms = the holder's PTTL (0: no TTL), or, when the lock is free but
// another waiter is at the head, the time until that waiter's deadline (a
// dead head is dropped then); position = our place in the queue (1 =
// head), 0 if not queued. A free lock with another head passes the wake
// signal on while the round's budget lasts (see above). The fence INCR is
// the grant's first write; its failure (wrong type, INT64_MAX, OOM) is the
// server's error naming the counter, with the lock key unset.
constexpr Script kFairAcquireScript = make_script(
    EDGELOCK_FAIR_PRELUDE
    "local tok, wt = ARGV[1], tonumber(ARGV[3])\n"
    "local cur = C('GET', KEYS[1])\n"
    "if cur == tok or (not cur and (not head or head == tok)) then\n"
    "local f = redis.pcall('INCR', KEYS[2])\n"
    "if type(f) == 'table' then\n"
    "return redis.error_reply(tostring(f.err) .. ' (edgelock fence counter)')\n"
    "end\n"
    "C('SET', KEYS[1], tok, 'PX', ARGV[2])\n"
    "if seqs[tok] then C('HDEL', Q, 'w:' .. tok) n = n - 1 end\n"
    "C('HDEL', Q, 'pass') C('DEL', T) tidy()\n"
    "return f\n"
    "end\n"
    "local wait = 0\n"
    "if cur then wait = math.max(C('PTTL', KEYS[1]), 0) else\n"
    "wait = hdue - now\n"
    "local p = tonumber(C('HGET', Q, 'pass'))\n"
    "if p and p > 0 then C('HINCRBY', Q, 'pass', -1) signal(math.abs(wt)) end\n"
    "end\n"
    "local pos = 0\n"
    "if wt > 0 then\n"
    "local s = seqs[tok]\n"
    "if not s then s = C('HINCRBY', Q, 'seq', 1) n = n + 1 end\n"
    "last = math.max(last, now + wt)\n"
    "C('HSET', Q, 'w:' .. tok, s .. ':' .. (now + wt))\n"
    "pos = 1\n"
    "for w, x in pairs(seqs) do if x < s then pos = pos + 1 end end\n"
    "tidy()\n"
    "end\n"
    "return {wait, pos}\n");

// ARGV[1] = token, ARGV[2] = the signal's TTL in ms (the waiter timeout).
// Returns 1 if deleted, 0 if not ours (left alone). A release with waiters
// queued wakes the head: one signal, and 2 x waiters passes for it.
constexpr Script kFairReleaseScript = make_script(
    EDGELOCK_FAIR_PRELUDE
    "if C('GET', KEYS[1]) ~= ARGV[1] then tidy() return 0 end\n"
    "C('DEL', KEYS[1])\n"
    "if head then C('HSET', Q, 'pass', 2 * n) signal(tonumber(ARGV[2])) end\n"
    "tidy()\n"
    "return 1\n");

// A waiter that stops waiting leaves the queue. ARGV[1] = token, ARGV[2] =
// the signal's TTL in ms. If it was the head and the lock is free, the new
// head is woken as by a release. Returns 1.
constexpr Script kFairLeaveScript = make_script(
    EDGELOCK_FAIR_PRELUDE
    "if seqs[ARGV[1]] then\n"
    "C('HDEL', Q, 'w:' .. ARGV[1])\n"
    "n = n - 1\n"
    "if head == ARGV[1] and n > 0 and C('EXISTS', KEYS[1]) == 0 then\n"
    "C('HSET', Q, 'pass', 2 * n) signal(tonumber(ARGV[2]))\n"
    "end\n"
    "end\n"
    "tidy()\n"
    "return 1\n");

#undef EDGELOCK_FAIR_PRELUDE

}  // namespace detail
}  // namespace edgelock
