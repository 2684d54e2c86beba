#pragma once
// The Lua scripts behind a FairLock (private). Each is one atomic step on
// the server; every key a script touches is passed in KEYS, all in the lock
// key's hash slot (lock_keys.h).
//
// The queue is one hash, "{key}:queue":
//   "w:<token>" = "<seq>:<deadline>": a waiter, its arrival number and the
//                 server time (ms) after which it is dropped;
//   "s:<seq>"   = "<token>": the waiter of each arrival number;
//   "seq"       = the last arrival number given out;
//   "head"      = no live waiter has a lower arrival number.
// The head of the queue is found from "head" upwards, dropping the waiters
// that left or whose deadline passed on the way (each arrival is stepped
// over once), so the steps of a handoff cost a few commands whatever the
// queue's length. Time is the server's own (TIME; scripts are
// effect-replicated): a waiter that crashed or stopped waiting is dropped
// when it reaches the head, so it delays the others by at most one waiter
// timeout.
//
// Waking only the head: each waiter blocks on its own list,
// "{key}:w:<seq>". A grant returns the seq of the waiter that is next; the
// holder's release names that list, so the release wakes exactly the head
// (the head's attempt is pipelined behind its BLPOP). If the head changed
// meanwhile (it left, or arrived after the grant), the release returns the
// head's seq instead and the client wakes it with kFairWakeScript.
//
// The queue key lives at least one waiter timeout after its last write,
// and every wake signal at most that long, so an arrival number is never
// reused while a signal for it may still be waiting.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// Each Lua line on its own line, as the script reads.
// clang-format off

// Shared start of every fair script; the script sets C (redis.call), Q (the
// queue key) and wt (the waiter timeout in ms, its sign ignored) first.
// Gives `now`, entry(token) (seq and deadline of a live waiter; a dead or
// malformed one is dropped), drop(token, seq), head() (the live waiter
// with the lowest seq: token, seq, deadline; nil if none) and tidy().
#define EDGELOCK_FAIR_PRELUDE                                                 \
  "local t = C('TIME')\n"                                                     \
  "local now = t[1] * 1000 + math.floor(t[2] / 1000)\n"                       \
  "local function drop(w, s)\n"                                               \
  "C('HDEL', Q, 'w:'..w) if s then C('HDEL', Q, 's:'..s) end\n"               \
  "end\n"                                                                     \
  "local function entry(w)\n"                                                 \
  "local v = C('HGET', Q, 'w:'..w)\n"                                         \
  "if not v then return end\n"                                                \
  "local s, d = v:match('^(%d+):(%d+)$')\n"                                   \
  "s, d = tonumber(s), tonumber(d)\n"                                         \
  "if d and d > now then return s, d end\n"                                   \
  "drop(w, s)\n"                                                              \
  "end\n"                                                                     \
  "local function head()\n"                                                   \
  "local hv = C('HMGET', Q, 'head', 'seq')\n"                                 \
  "local h0, top = tonumber(hv[1]) or 1, tonumber(hv[2]) or 0\n"              \
  "for h = h0, top do\n"                                                      \
  "local w = C('HGET', Q, 's:'..h)\n"                                         \
  "if w then\n"                                                               \
  "local s, d = entry(w)\n"                                                   \
  "if s == h then\n"                                                          \
  "if h ~= h0 then C('HSET', Q, 'head', h) end\n"                             \
  "return w, h, d\n"                                                          \
  "end\n"                                                                     \
  "C('HDEL', Q, 's:'..h)\n"                                                   \
  "end\n"                                                                     \
  "end\n"                                                                     \
  "if top >= h0 then C('HSET', Q, 'head', top + 1) end\n"                     \
  "end\n"                                                                     \
  "local function tidy()\n"                                                   \
  "if C('PTTL', Q) < math.abs(wt) then C('PEXPIRE', Q, math.abs(wt)) end\n"   \
  "end\n"

// KEYS[1] = lock key, KEYS[2] = fence counter (shared with Lock, so fences
// stay monotonic if a key moves between the two), KEYS[3] = queue. ARGV[1]
// = token, ARGV[2] = ttl ms, ARGV[3] = waiter timeout ms: positive to join
// (or stay in) the queue, negative to only try. Grants when the lock is
// free and nobody is queued ahead (or the key holds our token already: a
// retry after a lost reply re-arms it, to max(its PTTL, ttl): never
// shorter, as a retry given up on may run after a longer extend succeeded),
// leaving the queue: returns {fence >= 1, seq of the next waiter or 0}.
// Otherwise returns {-wait_ms <= 0, position, seq}: wait_ms = the holder's
// PTTL (0: no TTL), or, when the lock is free but another waiter is at the
// head, the time until that waiter's deadline (a dead head is dropped
// then); position = our place (1 = head; arrivals ahead that left count
// until the head passes them) and seq our arrival number, both 0 if not
// queued. (A grant leads with a positive integer, so a replicated back end
// confirms it with WAIT; a busy answer does not.) The fence INCR is the
// grant's first write; its failure (wrong type, INT64_MAX, OOM) is the
// server's error naming the counter, with the lock key unset, as is a
// counter at 2^53 (a Lua number beyond would round: two grants, one fence).
constexpr Script kFairAcquireScript = make_script(
    "local C, Q, tok, wt = redis.call, KEYS[3], ARGV[1], tonumber(ARGV[3])\n"
    EDGELOCK_FAIR_PRELUDE
    "local cur = redis.pcall('GET', KEYS[1])\n"
    "local hw, hs, hd = nil, 0, 0\n"
    "if not cur then hw, hs, hd = head() end\n"
    "if cur == tok or (not cur and (not hw or hw == tok)) then\n"
    "local f = redis.pcall('INCR', KEYS[2])\n"
    "if type(f) == 'table' then\n"
    "return redis.error_reply(tostring(f.err)..' (edgelock fence counter)')\n"
    "end\n"
    "if f >= 2^53 then return redis.error_reply('ERR edgelock fence counter at 2^53') end\n"
    "local px = ARGV[2]\n"
    "if cur then px = math.max(C('PTTL', KEYS[1]), tonumber(px)) end\n"
    "C('SET', KEYS[1], tok, 'PX', px)\n"
    "local s = entry(tok)\n"
    "if s then drop(tok, s) end\n"
    "local nw, ns = head()\n"
    "return {f, ns or 0}\n"
    "end\n"
    "local wait = hd - now\n"
    "if cur then wait = math.max(C('PTTL', KEYS[1]), 0) end\n"
    "if wt < 0 then return {-wait, 0, 0} end\n"
    "local s = entry(tok)\n"
    "if not s then\n"
    "s = C('HINCRBY', Q, 'seq', 1)\n"
    "C('HSET', Q, 's:'..s, tok)\n"
    "end\n"
    "C('HSET', Q, 'w:'..tok, s..':'..(now + wt))\n"
    "tidy()\n"
    "if cur then hw, hs = head() end\n"
    "return {-wait, s - (hs or s) + 1, s}\n");

// KEYS[1] = lock key, KEYS[2] = queue, KEYS[3] = the wake list of the
// waiter the holder was told is next ("{key}:w:<seq>"; "w:0" if none).
// ARGV[1] = token, ARGV[2] = that seq (0 if none), ARGV[3] = waiter
// timeout ms (the signal's TTL). A place of ours in the queue is given up
// first (a release after a failed acquire). Returns 0 if not ours (left
// alone), 1 if deleted (and the head, if any, woken), or -seq if deleted
// and the head is another waiter than named: the caller wakes it
// (kFairWakeScript). The named waiter, if still queued, is the head: it
// had the lowest arrival number at the grant, and later ones are higher.
// A wake list of another type gets no signal (its waiter wakes at its
// cap); the delete still happens.
constexpr Script kFairReleaseScript = make_script(
    "local C, Q, wt = redis.call, KEYS[2], tonumber(ARGV[3])\n"
    EDGELOCK_FAIR_PRELUDE
    "local mine = entry(ARGV[1])\n"
    "if mine then drop(ARGV[1], mine) end\n"
    "if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
    "C('DEL', KEYS[1])\n"
    "tidy()\n"
    "local named = tonumber(ARGV[2])\n"
    "local w = named > 0 and C('HGET', Q, 's:'..named)\n"
    "if not (w and entry(w) == named) then\n"
    "local hw, hs = head()\n"
    "return hs and -hs or 1\n"
    "end\n"
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
    "local s = entry(ARGV[1])\n"
    "if not s then return 1 end\n"
    "local hw = head()\n"
    "drop(ARGV[1], s)\n"
    "tidy()\n"
    "if hw ~= ARGV[1] or C('EXISTS', KEYS[1]) == 1 then return 1 end\n"
    "local nw, ns = head()\n"
    "return ns and -ns or 1\n");

#undef EDGELOCK_FAIR_PRELUDE

// KEYS[1] = the lock key (unread: the wake list is its companion, named
// when the call is encoded, so a handle stores no second key); KEYS[2] = a
// waiter's wake list; ARGV[1] = its TTL in ms. One signal there (never
// more than one). Returns 1, or 0 if the key is of another type (then the
// waiter wakes at its cap).
constexpr Script kFairWakeScript = make_script(
    "if type(redis.pcall('LPUSH', KEYS[2], '1')) ~= 'number' then return 0 end\n"
    "redis.call('LTRIM', KEYS[2], 0, 0)\n"
    "redis.call('PEXPIRE', KEYS[2], ARGV[1])\n"
    "return 1\n");

// clang-format on

}  // namespace detail
}  // namespace edgelock
