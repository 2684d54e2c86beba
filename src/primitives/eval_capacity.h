#pragma once
// The longest EVAL any primitive can send (private). After a NOSCRIPT reply
// (server restart, SCRIPT FLUSH) the connection re-sends the script's whole
// body, and that frame must fit the command buffer: computed here at compile
// time from every script of the registry (script_registry.h) and the
// capacities, so a longer script or key limit fails the build instead of
// failing every call after a SCRIPT FLUSH. The one two-command write (a
// waiting lock's BLPOP + EVALSHA) is checked too. The failure names the
// Meson option tx_buffer_size and the size needed (check_config.h).

#include <cstddef>

#include "base/check_config.h"
#include "edgelock/limits.h"
#include "edgelock/script.h"
#include "primitives/script_registry.h"

namespace edgelock {
namespace detail {

/// KEYS[1] is the key the caller named; KEYS[2..] are companion keys built
/// from it as the call is encoded (braces and a short suffix: lock_keys.h;
/// init() refuses a key whose companions pass kMaxCompanionLen, kMaxKeyLen
/// + 8). 16 leaves room for a longer suffix.
constexpr size_t kCompanionKeyOverhead = 16;
/// A FairLock waiter's wake list, "{key}:w:<seq>": braces, ":w:" and up
/// to 20 digits.
constexpr size_t kWakeKeyOverhead = 32;
/// Longest script argument: tokens, owner and permit ids (kMaxTokenLen);
/// decimals and words are shorter.
constexpr size_t kMaxScriptArgLen = kMaxTokenLen > 24 ? kMaxTokenLen : 24;

using config_check::bulk_frame;
using config_check::decimal_digits;

/// The EVAL (or, by_sha, EVALSHA) frame of `e` with every key and argument
/// it reads at its longest: EVAL body numkeys key... arg...
constexpr size_t eval_frame_bound(const ScriptEntry& e, bool by_sha) {
  size_t n = config_check::array_header(3 + e.keys + e.args);
  n += by_sha ? bulk_frame(7) + bulk_frame(40) : bulk_frame(4) + bulk_frame(e.script->len);
  n += bulk_frame(decimal_digits(e.keys));
  for (size_t i = 0; i < e.keys; ++i) {
    size_t overhead = i == 0 ? 0 : kCompanionKeyOverhead;
    if (i + 1 == e.wake_key) overhead = kWakeKeyOverhead;
    n += bulk_frame(kMaxKeyLen + overhead);
  }
  return n + e.args * bulk_frame(kMaxScriptArgLen);
}

/// SCRIPT LOAD with the body (no keys).
constexpr size_t script_load_frame(const Script& s) {
  return config_check::array_header(3) + bulk_frame(6) + bulk_frame(4) + bulk_frame(s.len);
}

/// Bytes of the longest EVAL frame of a script re-sent by body.
constexpr size_t longest_eval() {
  size_t best = 0;
  for (const ScriptEntry& e : kScriptRegistry) {
    if (e.reload == Reload::kByBody) best = config_check::max_of(best, eval_frame_bound(e, false));
  }
  return best;
}
constexpr size_t kLongestEval = longest_eval();

/// Bytes of the longest SCRIPT LOAD or EVALSHA of a script loaded with
/// SCRIPT LOAD when its EVAL does not fit (src/primitives/fair_lock.cc).
constexpr size_t longest_loaded() {
  size_t best = 0;
  for (const ScriptEntry& e : kScriptRegistry) {
    if (e.reload != Reload::kScriptLoad) continue;
    best = config_check::max_of(
        best, config_check::max_of(script_load_frame(*e.script), eval_frame_bound(e, true)));
  }
  return best;
}
constexpr size_t kLongestLoaded = longest_loaded();

/// "BLPOP <wake list> <seconds>": the timeout is at most 20 characters
/// (blpop_timeout.h formats it into a DecimalText); 31 leaves room.
constexpr size_t blpop_frame(size_t overhead) {
  return config_check::array_header(3) + bulk_frame(5) + bulk_frame(kMaxKeyLen + overhead) +
         bulk_frame(31);
}

/// Bytes of the one write that carries two commands: a waiting lock's
/// BLPOP with its acquire queued behind as EVALSHA (src/primitives/lock_wait.cc,
/// src/primitives/fair_lock_wait.cc, Connection::command_then_eval).
constexpr size_t longest_pipelined_wait() {
  size_t best = 0;
  for (const ScriptEntry& e : kScriptRegistry) {
    if (e.behind == Behind::kNothing) continue;
    const size_t wake = e.behind == Behind::kLockWake ? kCompanionKeyOverhead : kWakeKeyOverhead;
    best = config_check::max_of(best, blpop_frame(wake) + eval_frame_bound(e, true));
  }
  return best;
}
constexpr size_t kLongestPipelinedWait = longest_pipelined_wait();

/// Bytes the command buffer must hold: the longest single write.
constexpr size_t kTxBufferNeeded =
    config_check::max_of(config_check::max_of(kLongestEval, kLongestPipelinedWait),
                         config_check::max_of(kLongestLoaded, config_check::kLongestFixedCommand));

// Fails the build naming the Meson option tx_buffer_size; the compiler's
// note shows kMinimum, the smallest size that works with these scripts at
// max_key_len.
static_assert(
    config_check::buffer_at_least<config_check::Buffer::kTx, kTxBufferNeeded, kTxBufferSize>(),
    "tx_buffer_size");

}  // namespace detail
}  // namespace edgelock
