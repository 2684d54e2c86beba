#pragma once
// Companion key names (private). A companion key must hash to the lock
// key's cluster slot so one script can touch both without CROSSSLOT. A
// handle keeps its key once: the RESP encoder writes a companion straight
// into the command buffer (append_companion()).

#include <cstddef>

#include "base/byte_builder.h"
#include "edgelock/bytes.h"

namespace edgelock {
namespace detail {

/// The companions' suffixes: static, so a started call may view them
/// until its reply is in (ScriptCall::companions).
inline constexpr uint8_t kFenceText[] = {':', 'f', 'e', 'n', 'c', 'e'};
inline constexpr uint8_t kWakeText[] = {':', 'w', 'a', 'k', 'e'};
inline constexpr uint8_t kQueueText[] = {':', 'q', 'u', 'e', 'u', 'e'};
inline constexpr Bytes kFenceSuffix{kFenceText, sizeof kFenceText};
inline constexpr Bytes kWakeSuffix{kWakeText, sizeof kWakeText};
inline constexpr Bytes kQueueSuffix{kQueueText, sizeof kQueueText};

/// True if `key` contains a hash tag ({...} with non-empty content).
bool has_hash_tag(Bytes key);

/// The companion of `key` with `suffix` (":fence", ":wake"):
/// "{key}:fence" when key has no '{'; "fence:{X}" when the whole key is one
/// tag "{X}" (else it would collide with the key "X"); otherwise
/// "key:fence". Distinct keys never share a companion, and the name hashes
/// to the key's slot whenever the key carries a valid tag or no '{' / '}'.
/// Its length in bytes:
size_t companion_length(Bytes key, Bytes suffix);
/// Appends it to `out` (sticky overflow, as every ByteBuilder append).
void append_companion(ByteBuilder& out, Bytes key, Bytes suffix);
/// Writes it into out[cap]. Returns the length.
/// Errors: kInvalidArgument (does not fit).
Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap);

}  // namespace detail
}  // namespace edgelock
