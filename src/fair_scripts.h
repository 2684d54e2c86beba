#pragma once
// The Lua scripts behind a FairLock (private). Each is one atomic step on
// the server; every key a script touches is passed in KEYS, all in the lock
// key's hash slot (lock_keys.h).
//
// The queue is one hash, "{key}:queue": a field "w:<token>" per waiter
// holding "<seq>:<deadline>" (its arrival number and the server time in ms
// after which it is dropped), and "seq", the arrival counter. Every script
// scans it (O(waiters)): a queue holds one entry per waiting handle.
//
// Time is the server's own (TIME; scripts are effect-replicated). A waiter
// whose deadline passed (it crashed or stopped waiting) is dropped by the
// next script that looks, so a dead waiter delays the others by at most
// one waiter timeout.
//
// Waking only the head: each waiter blocks on its own list,
// "{key}:w:<seq>". A grant returns the seq of the waiter that is next, and
// the holder's release names that list, so the release wakes exactly the
// head (one LPUSH; the head's attempt is pipelined behind its BLPOP). If
// the head changed meanwhile (it left, or joined after the grant), the
// release returns the head's seq instead and the client wakes it with
// kFairWakeScript, one round trip later.
//
// The queue key lives at least one waiter timeout after its last use, and
// every wake signal at most that long, so an arrival number is never
// reused while a signal for it may still be waiting.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// Shared start of every fair script; the script sets C (redis.call), Q (the
// queue key) and wt (the waiter timeout in ms, its sign ignored) first.
// Gives `now`, the scan (drops expired or malformed entries; seqs[token],
// n waiters, last = the latest deadline), the head (lowest seq: head,
// hseq, hdue), lowest(skip) (the lowest seq but `skip`'s, 0 if none) and
// tidy() (keeps the queue key for its latest deadline, at least wt).
#define EDGELOCK_FAIR_PRELUDE                                             \
  "local t = C('TIME')\n"                                                 \
  "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                   \
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
  "local function lowest(skip)\n"                                         \
  "local b = 0\n"                                                         \
  "for w, s in pairs(seqs) do if w ~= skip and (b == 0 or s < b) then b = s end end\n" \
  "return b\n"                                                            \
  "end\n"                                                                 \
  "local function tidy()\n"                                               \
  "C('PEXPIRE', Q, math.max(last - now + 1, math.abs(wt)))\n"             \
  "end\n"

// KEYS[1] = lock key, KEYS[2] = fence counter (shared with Lock, so fences
// stay monotonic if a key moves between the two), KEYS[3] = queue.
// ARGV[1] = token, ARGV[2] = ttl ms, ARGV[3] = waiter timeout ms: positive
// to join (or stay in) the queue, negative to only try.
// Grants when the lock is free and nobody is queued ahead (or the key
// holds our token already: a retry after a lost reply re-arms it), leaving
// the queue: returns {fence >= 1, seq of the next waiter or 0}. Otherwise
// returns {-wait_ms <= 0, position, seq}: wait_ms = the holder's PTTL (0:
// no TTL), or, when the lock is free but another waiter is at the head,
// the time until that waiter's deadline (a dead head is dropped then);
// position = our place (1 = head) and seq our arrival number, both 0 if
// not queued. (A grant leads with a positive integer, so a replicated back
// end confirms it with WAIT; a busy answer does not.) The fence INCR is
// the grant's first write; its failure (wrong type, INT64_MAX, OOM) is the
// server's error naming the counter, with the lock key unset.
constexpr Script kFairAcquireScript = make_script(
    "local C, Q, tok, wt = redis.call, KEYS[3], ARGV[1], tonumber(ARGV[3])\n"
    EDGELOCK_FAIR_PRELUDE
    "local cur = C('GET', KEYS[1])\n"
    "if cur == tok or (not cur and (not head or head == tok)) then\n"
    "local f = redis.pcall('INCR', KEYS[2])\n"
    "if type(f) == 'table' then\n"
    "return redis.error_reply(tostring(f.err) .. ' (edgelock fence counter)')\n"
    "end\n"
    "C('SET', KEYS[1], tok, 'PX', ARGV[2])\n"
    "if seqs[tok] then C('HDEL', Q, 'w:' .. tok) end\n"
    "tidy()\n"
    "return {f, lowest(tok)}\n"
    "end\n"
    "local wait = hdue - now\n"
    "if cur then wait = math.max(C('PTTL', KEYS[1]), 0) end\n"
    "local pos, s = 0, 0\n"
    "if wt > 0 then\n"
    "s = seqs[tok]\n"
    "if not s then s = C('HINCRBY', Q, 'seq', 1) end\n"
    "last = math.max(last, now + wt)\n"
    "C('HSET', Q, 'w:' .. tok, s .. ':' .. (now + wt))\n"
    "pos = 1\n"
    "for w, x in pairs(seqs) do if x < s then pos = pos + 1 end end\n"
    "end\n"
    "tidy()\n"
    "return {-wait, pos, s}\n");

// KEYS[1] = lock key, KEYS[2] = queue, KEYS[3] = the wake list of the
// waiter the holder was told is next ("{key}:w:<seq>"; "w:0" if none).
// ARGV[1] = token, ARGV[2] = that seq (0 if none), ARGV[3] = waiter
// timeout ms (the signal's TTL). A place of ours in the queue is given up
// first (a release after a failed acquire). Returns 0 if not ours (left
// alone), 1 if
// deleted (and the head, if any, woken), or -seq if deleted and the head
// is another waiter than named: the caller wakes it (kFairWakeScript). A
// wake list of another type gets no signal (its waiter wakes at its cap);
// the delete still happens.
constexpr Script kFairReleaseScript = make_script(
    "local C, Q, wt = redis.call, KEYS[2], tonumber(ARGV[3])\n"
    EDGELOCK_FAIR_PRELUDE
    "tidy()\n"
    "local nxt = hseq or 0\n"
    "if seqs[ARGV[1]] then\n"
    "C('HDEL', Q, 'w:' .. ARGV[1])\n"
    "if head == ARGV[1] then nxt = lowest(ARGV[1]) end\n"
    "end\n"
    "if C('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "C('DEL', KEYS[1])\n"
    "if nxt == 0 then return 1 end\n"
    "if nxt ~= tonumber(ARGV[2]) then return -nxt end\n"
    "if type(redis.pcall('LPUSH', KEYS[3], '1')) == 'number' then\n"
    "C('LTRIM', KEYS[3], 0, 0) C('PEXPIRE', KEYS[3], wt)\n"
    "end\n"
    "return 1\n");

// A waiter that stops waiting leaves the queue. KEYS[1] = lock key,
// KEYS[2] = queue; ARGV[1] = token, ARGV[2] = waiter timeout ms. Returns 1,
// or -seq when it was the head of a free lock: the caller wakes the new
// head (kFairWakeScript).
constexpr Script kFairLeaveScript = make_script(
    "local C, Q, wt = redis.call, KEYS[2], tonumber(ARGV[2])\n"
    EDGELOCK_FAIR_PRELUDE
    "tidy()\n"
    "if not seqs[ARGV[1]] then return 1 end\n"
    "C('HDEL', Q, 'w:' .. ARGV[1])\n"
    "local nxt = lowest(ARGV[1])\n"
    "if head ~= ARGV[1] or nxt == 0 or C('EXISTS', KEYS[1]) == 1 then return 1 end\n"
    "return -nxt\n");

#undef EDGELOCK_FAIR_PRELUDE

// KEYS[1] = a waiter's wake list; ARGV[1] = its TTL in ms. One signal
// there (never more than one). Returns 1, or 0 if the key is of another
// type (then the waiter wakes at its cap).
constexpr Script kFairWakeScript = make_script(
    "if type(redis.pcall('LPUSH', KEYS[1], '1')) ~= 'number' then return 0 end\n"
    "redis.call('LTRIM', KEYS[1], 0, 0)\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
    "return 1\n");

}  // namespace detail
}  // namespace edgelock
