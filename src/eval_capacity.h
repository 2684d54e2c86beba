#pragma once
// The longest EVAL any primitive can send (private). After a NOSCRIPT reply
// (server restart, SCRIPT FLUSH) the connection re-sends the script's whole
// body, and that frame must fit the command buffer: computed here at compile
// time from the script texts and the capacities, so a longer script or key
// limit fails the build instead of failing every call after a SCRIPT FLUSH.
// A new script belongs in kAllScripts below.

#include <cstddef>

#include "edgelock/limits.h"
#include "edgelock/script.h"
#include "lock_scripts.h"
#include "rate_scripts.h"
#include "reentrant_scripts.h"
#include "semaphore_scripts.h"

namespace edgelock {
namespace detail {

/// KEYS[1] is the key the caller named; KEYS[2..] are companion keys built
/// from it (braces and a short suffix: lock_keys.h, sized kMaxKeyLen + 8 in
/// lock.h). 16 leaves room for a longer suffix.
constexpr size_t kCompanionKeyOverhead = 16;
/// Longest script argument: tokens, owner and permit ids (kMaxTokenLen);
/// decimals and words are shorter.
constexpr size_t kMaxScriptArgLen = kMaxTokenLen > 24 ? kMaxTokenLen : 24;

constexpr size_t decimal_digits(size_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

/// RESP size of one bulk string of `n` bytes: "$<n>\r\n<bytes>\r\n".
constexpr size_t bulk_size(size_t n) { return 1 + decimal_digits(n) + 2 + n + 2; }

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

/// The EVAL frame of `s` with every key and argument it reads at its
/// longest: EVAL body numkeys key... arg...
constexpr size_t eval_frame_bound(const Script& s) {
  const size_t nkeys = max_index(s, "KEYS");
  const size_t nargs = max_index(s, "ARGV");
  size_t n = 1 + decimal_digits(3 + nkeys + nargs) + 2;  // "*<argc>\r\n"
  n += bulk_size(4) + bulk_size(s.len) + bulk_size(decimal_digits(nkeys));
  for (size_t i = 0; i < nkeys; ++i) {
    n += bulk_size(kMaxKeyLen + (i == 0 ? 0 : kCompanionKeyOverhead));
  }
  return n + nargs * bulk_size(kMaxScriptArgLen);
}

constexpr const Script* kAllScripts[] = {
    &kAcquireScript,          &kReleaseScript,          &kExtendScript,
    &kOwnedScript,            &kFenceRaiseScript,       &kReentrantAcquireScript,
    &kReentrantReleaseScript, &kReentrantExtendScript,  &kSemAcquireScript,
    &kSemReleaseScript,       &kSemExtendScript,        &kSemCountScript,
    &kCooldownScript,         &kQuotaScript,            &kRatePeekScript,
};

constexpr size_t longest_eval() {
  size_t best = 0;
  for (const Script* s : kAllScripts) {
    const size_t n = eval_frame_bound(*s);
    if (n > best) best = n;
  }
  return best;
}

/// Bytes of the longest EVAL frame any primitive sends.
constexpr size_t kLongestEval = longest_eval();

static_assert(kLongestEval <= kTxBufferSize,
              "the command buffer cannot hold the longest EVAL (script body + keys at "
              "max_key_len): raise the Meson option tx_buffer_size (EDGELOCK_TX_BUFFER_SIZE) "
              "or lower max_key_len; tests print the size needed (EvalCapacity)");

}  // namespace detail
}  // namespace edgelock
