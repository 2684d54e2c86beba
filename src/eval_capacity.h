#pragma once
// The longest EVAL any primitive can send (private). After a NOSCRIPT reply
// (server restart, SCRIPT FLUSH) the connection re-sends the script's whole
// body, and that frame must fit the command buffer: computed here at compile
// time from the script texts and the capacities, so a longer script or key
// limit fails the build instead of failing every call after a SCRIPT FLUSH.
// The one two-command write (a waiting Lock's BLPOP + EVALSHA) is checked
// too. The failure names the Meson option tx_buffer_size and the size
// needed (check_config.h). A new script belongs in kAllScripts below, or,
// if it is loaded with SCRIPT LOAD instead of re-sent by body, beside
// kLongestLoaded.

#include <cstddef>

#include "edgelock/limits.h"
#include "edgelock/script.h"
#include "fair_scripts.h"
#include "lock_scripts.h"
#include "rate_scripts.h"
#include "reentrant_scripts.h"
#include "semaphore_scripts.h"

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

/// The highest N in "<name>[N]" in the script text (0 if none): how many
/// keys or arguments the script reads.
constexpr size_t max_index(const Script& s, const char* name) {
  const size_t name_len = const_strlen(name);
  size_t best = 0;
  for (size_t i = 0; i + name_len + 2 < s.len; ++i) {
    size_t j = 0;
    while (j < name_len && s.body[i + j] == name[j]) ++j;
    if (j < name_len || s.body[i + j] != '[') continue;
    size_t n = 0;
    size_t k = i + j + 1;
    while (k < s.len && s.body[k] >= '0' && s.body[k] <= '9') n = n * 10 + (s.body[k++] - '0');
    if (k < s.len && s.body[k] == ']' && n > best) best = n;
  }
  return best;
}

/// The EVAL (or, by_sha, EVALSHA) frame of `s` with every key and argument
/// it reads at its longest: EVAL body numkeys key... arg... KEYS[wake_key]
/// (1-based; 0: none) is a wake list.
constexpr size_t eval_frame_bound(const Script& s, bool by_sha = false, size_t wake_key = 0) {
  const size_t nkeys = max_index(s, "KEYS");
  const size_t nargs = max_index(s, "ARGV");
  size_t n = config_check::array_header(3 + nkeys + nargs);
  n += by_sha ? bulk_frame(7) + bulk_frame(40) : bulk_frame(4) + bulk_frame(s.len);
  n += bulk_frame(decimal_digits(nkeys));
  for (size_t i = 0; i < nkeys; ++i) {
    const size_t overhead = i + 1 == wake_key ? kWakeKeyOverhead : kCompanionKeyOverhead;
    n += bulk_frame(kMaxKeyLen + (i == 0 ? 0 : overhead));
  }
  return n + nargs * bulk_frame(kMaxScriptArgLen);
}

constexpr const Script* kAllScripts[] = {
    &kAcquireScript,
    &kReleaseScript,
    &kExtendScript,
    &kOwnedScript,
    &kFenceRaiseScript,
    &kQuorumAcquireScript,
    &kReentrantAcquireScript,
    &kReentrantReleaseScript,
    &kReentrantExtendScript,
    &kSemAcquireScript,
    &kSemReleaseScript,
    &kSemExtendScript,
    &kSemCountScript,
    &kCooldownScript,
    &kQuotaScript,
    &kRatePeekScript,
};

constexpr size_t longest_eval() {
  size_t best = 0;
  for (const Script* s : kAllScripts) {
    const size_t n = eval_frame_bound(*s);
    if (n > best) best = n;
  }
  return best;
}

/// Bytes of the longest EVAL frame any primitive sends (the FairLock's
/// wake script carries a wake list).
constexpr size_t kLongestEval =
    config_check::max_of(longest_eval(), eval_frame_bound(kFairWakeScript, false, 1));

/// Scripts too long to re-send by body with their keys at max_key_len: a
/// FairLock sends SCRIPT LOAD (the body without keys) when the server has
/// lost them and their EVAL does not fit (src/fair_lock.cc). Checked: the
/// SCRIPT LOAD, and the EVALSHA with every key and argument at its longest.
constexpr size_t script_load_frame(const Script& s) {
  return config_check::array_header(3) + bulk_frame(6) + bulk_frame(4) + bulk_frame(s.len);
}

/// Bytes of the longest SCRIPT LOAD or EVALSHA of a loaded script.
constexpr size_t kLongestLoaded = config_check::max_of(
    config_check::max_of(config_check::max_of(script_load_frame(kFairAcquireScript),
                                              script_load_frame(kFairReleaseScript)),
                         script_load_frame(kFairLeaveScript)),
    config_check::max_of(config_check::max_of(eval_frame_bound(kFairAcquireScript, true),
                                              eval_frame_bound(kFairReleaseScript, true, 3)),
                         eval_frame_bound(kFairLeaveScript, true)));

/// Bytes of the one write that carries two commands: a waiting Lock's
/// "BLPOP {key}:wake <seconds>" (a FairLock's "BLPOP {key}:w:<seq> ...")
/// with its acquire queued behind as EVALSHA (src/lock_wait.cc,
/// src/fair_lock_wait.cc, Connection::command_then_eval). The timeout is
/// at most 20 characters (blpop_timeout.h formats it into a DecimalText);
/// 31 leaves room.
constexpr size_t blpop_frame(size_t overhead) {
  return config_check::array_header(3) + bulk_frame(5) + bulk_frame(kMaxKeyLen + overhead) +
         bulk_frame(31);
}
constexpr size_t kLongestPipelinedWait = config_check::max_of(
    blpop_frame(kCompanionKeyOverhead) + eval_frame_bound(kAcquireScript, true),
    blpop_frame(kWakeKeyOverhead) + eval_frame_bound(kFairAcquireScript, true));

/// Bytes the command buffer must hold: the longest single write.
constexpr size_t kTxBufferNeeded =
    config_check::max_of(config_check::max_of(kLongestEval, kLongestPipelinedWait),
                         config_check::max_of(kLongestLoaded, config_check::kLongestFixedCommand));

// Fails the build naming the Meson option tx_buffer_size; the compiler's
// note shows kMinimum, the smallest size that works with these scripts at
// max_key_len.
static_assert(config_check::tx_buffer_size_at_least<kTxBufferNeeded, kTxBufferSize>(),
              "tx_buffer_size");

}  // namespace detail
}  // namespace edgelock
