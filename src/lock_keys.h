#pragma once
// Companion key names (private). A companion key must hash to the lock
// key's cluster slot so one script can touch both without CROSSSLOT.

#include <cstddef>

#include "edgelock/bytes.h"

namespace edgelock {
namespace detail {

/// True if `key` contains a hash tag ({...} with non-empty content).
bool has_hash_tag(Bytes key);

/// Writes the companion of `key` with `suffix` (":fence", ":wake") into
/// out[cap]: "{key}:fence" when key has no '{'; "fence:{X}" when the whole
/// key is one tag "{X}" (else it would collide with the key "X"); otherwise
/// "key:fence". Distinct keys never share a companion, and the name hashes
/// to the key's slot whenever the key carries a valid tag or no '{' / '}'.
/// Returns the length. Errors: kInvalidArgument (does not fit).
Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap);

}  // namespace detail
}  // namespace edgelock
