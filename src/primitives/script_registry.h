#pragma once
// Every Lua script the library sends (private), in one list. Being here is
// what gets a script checked against the command buffer (eval_capacity.h)
// and known to the simulator by its SHA-1 (tests/sim/model/scripts.cc);
// scripts/check-scripts fails the tests when src/ defines a Script that is
// not here. The SHA-1 is the constant's own, from make_script() at compile
// time. The key and argument counts are stated so a reader sees them, and
// checked against the body below, so they cannot drift from it.

#include <cstddef>
#include <cstdint>

#include "backends/cluster_scripts.h"
#include "edgelock/script.h"
#include "lease/rate_scripts.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {
namespace detail {

/// How a script reaches a server that has lost it (NOSCRIPT).
enum class Reload : uint8_t {
  /// The connection re-sends the EVAL with the body, keys and arguments:
  /// that frame must fit the command buffer.
  kByBody,
  /// Too long for that with keys at max_key_len: when the EVAL does not
  /// fit, SCRIPT LOAD sends the body alone, then the EVALSHA again
  /// (FairLock::eval).
  kScriptLoad,
};

/// The BLPOP a script's EVALSHA may be queued behind in one write
/// (Connection::command_then_eval).
enum class Behind : uint8_t {
  kNothing,
  kLockWake,  ///< "BLPOP {key}:wake <s>" (src/primitives/lock_wait.cc).
  kFairWake,  ///< "BLPOP {key}:w:<seq> <s>" (src/primitives/fair_lock_wait.cc).
};

struct ScriptEntry {
  const char* name;  ///< The constant as spelt in src/*_scripts.h.
  const Script* script;
  size_t keys;      ///< The highest KEYS[n] the body reads.
  size_t args;      ///< The highest ARGV[n] the body reads.
  size_t wake_key;  ///< KEYS[n] that is a FairLock waiter's wake list; 0: none.
  Reload reload;
  Behind behind;
};

#define EDGELOCK_SCRIPT(s, keys, args, reload, wake_key, behind) \
  ScriptEntry { #s, &(s), (keys), (args), (wake_key), Reload::reload, Behind::behind }

// clang-format off
constexpr ScriptEntry kScriptRegistry[] = {
  //              constant               keys args reload    wake behind
  EDGELOCK_SCRIPT(kAcquireScript,           3, 2, kByBody,     0, kLockWake),
  EDGELOCK_SCRIPT(kReleaseScript,           2, 2, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kExtendScript,            1, 3, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kOwnedScript,             1, 1, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kFenceRaiseScript,        2, 2, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kQuorumAcquireScript,     2, 3, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kReentrantAcquireScript,  2, 5, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kReentrantReleaseScript,  1, 5, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kReentrantExtendScript,   1, 3, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kSemAcquireScript,        1, 3, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kSemReleaseScript,        1, 1, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kSemExtendScript,         1, 2, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kSemCountScript,          1, 0, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kRateScript,              1, 2, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kRatePeekScript,          1, 0, kByBody,     0, kNothing),
  EDGELOCK_SCRIPT(kFairAcquireScript,       3, 3, kScriptLoad, 0, kFairWake),
  EDGELOCK_SCRIPT(kFairReleaseScript,       3, 3, kScriptLoad, 3, kNothing),
  EDGELOCK_SCRIPT(kFairLeaveScript,         2, 2, kScriptLoad, 0, kNothing),
  EDGELOCK_SCRIPT(kFairWakeScript,          2, 1, kByBody,     2, kNothing),
  EDGELOCK_SCRIPT(kSlotsPageScript,         0, 1, kByBody,     0, kNothing),
};
// clang-format on

#undef EDGELOCK_SCRIPT

constexpr size_t kScriptCount = sizeof(kScriptRegistry) / sizeof(kScriptRegistry[0]);

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

/// The index of the first entry whose counts or wake key disagree with its
/// body (kScriptCount if none): the compiler's note names it.
constexpr size_t first_bad_counts() {
  for (size_t i = 0; i < kScriptCount; ++i) {
    const ScriptEntry& e = kScriptRegistry[i];
    if (e.keys != max_index(*e.script, "KEYS") || e.args != max_index(*e.script, "ARGV") ||
        e.wake_key > e.keys) {
      return i;
    }
  }
  return kScriptCount;
}

constexpr bool same_sha1(const Script& a, const Script& b) {
  for (size_t i = 0; i < 40; ++i) {
    if (a.sha1[i] != b.sha1[i]) return false;
  }
  return true;
}

/// The index of the first entry that repeats an earlier one's SHA-1
/// (kScriptCount if none): the simulator names a script by its SHA-1.
constexpr size_t first_repeated_sha1() {
  for (size_t i = 0; i < kScriptCount; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (same_sha1(*kScriptRegistry[i].script, *kScriptRegistry[j].script)) return i;
    }
  }
  return kScriptCount;
}

static_assert(first_bad_counts() == kScriptCount,
              "script registry: an entry's keys, args or wake key disagree with its body");
static_assert(first_repeated_sha1() == kScriptCount,
              "script registry: two entries have the same body (SHA-1)");

}  // namespace detail
}  // namespace edgelock
