#include "lock_keys.h"

#include <cstring>

namespace edgelock {
namespace detail {

bool has_hash_tag(Bytes key) {
  // Redis Cluster rule: the first '{', then the first '}' after it, with at
  // least one byte between.
  if (key.size == 0) return false;  // memchr(nullptr) is UB even for 0 bytes
  const void* open = std::memchr(key.data, '{', key.size);
  if (!open) return false;
  const size_t start = static_cast<size_t>(static_cast<const uint8_t*>(open) - key.data) + 1;
  const void* close = std::memchr(key.data + start, '}', key.size - start);
  return close && close != key.data + start;
}

namespace {

// "{X}" with X non-empty and free of '{': the whole key is one hash tag.
// Its plain companion "{X}:suffix" would also be the companion of the key
// "X", so these keys (and only these) get the other form.
bool whole_key_is_tag(Bytes key) {
  return key.size >= 3 && key.data[0] == '{' && key.data[key.size - 1] == '}' &&
         !std::memchr(key.data + 1, '{', key.size - 1);
}

}  // namespace

Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap) {
  ByteBuilder b(out, cap);
  const size_t suffix_len = std::strlen(suffix);
  if (whole_key_is_tag(key)) {
    // "fence:{X}": same tag, so same slot; it ends in '}', and every other
    // companion ends in its suffix (a letter), so no other key's companion
    // can be this name.
    const size_t skip = suffix_len > 0 && suffix[0] == ':' ? 1 : 0;
    b.append(suffix + skip, suffix_len - skip);
    b.append_char(':');
    b.append(key);
  } else if (key.size > 0 && std::memchr(key.data, '{', key.size)) {  // memchr(nullptr) is UB
    // Wrap only keys with no '{' at all: wrapping a key that has a '{' but
    // no valid tag would create a different tag (not cluster-safe anyway).
    b.append(key);
    b.append(suffix, suffix_len);
  } else {
    b.append_char('{');
    b.append(key);
    b.append_char('}');
    b.append(suffix, suffix_len);
  }
  if (!b.status().ok()) return ErrorCode::kInvalidArgument;
  return b.size();
}

}  // namespace detail
}  // namespace edgelock
