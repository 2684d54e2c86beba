#include "lock_keys.h"

#include <cstring>

namespace edgelock {
namespace detail {

bool has_hash_tag(Bytes key) {
  // Redis Cluster rule: the first '{', then the first '}' after it, with at
  // least one byte between.
  const void* open = std::memchr(key.data, '{', key.size);
  if (!open) return false;
  const size_t start = static_cast<size_t>(static_cast<const uint8_t*>(open) - key.data) + 1;
  const void* close = std::memchr(key.data + start, '}', key.size - start);
  return close && close != key.data + start;
}

Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap) {
  ByteBuilder b(out, cap);
  // Wrap only keys with no '{' at all: wrapping a key that has a '{' but no
  // valid tag would create a different tag. Such keys are not cluster-safe.
  if (std::memchr(key.data, '{', key.size)) {
    b.append(key);
  } else {
    b.append_char('{');
    b.append(key);
    b.append_char('}');
  }
  b.append(suffix, std::strlen(suffix));
  if (!b.status().ok()) return ErrorCode::kInvalidArgument;
  return b.size();
}

}  // namespace detail
}  // namespace edgelock
