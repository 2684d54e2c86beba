#pragma once
// Companion key names (private). A companion key must hash to the lock
// key's cluster slot so one script can touch both without CROSSSLOT.

#include <cstddef>

#include "edgelock/bytes.h"

namespace edgelock {
namespace detail {

/// True if `key` contains a hash tag ({...} with non-empty content).
bool has_hash_tag(Bytes key);

/// Writes the companion of `key` with `suffix` into out[cap]:
/// "{key}suffix" when key has no '{', else "keysuffix" (same slot when the
/// key carries a valid hash tag).
/// Returns the length. Errors: kInvalidArgument (does not fit).
Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap);

}  // namespace detail
}  // namespace edgelock
