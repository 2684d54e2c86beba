#include "base/lock_keys.h"

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

// The three forms of companion_key() (lock_keys.h).
enum class Form : uint8_t { kTagFirst, kAppended, kWrapped };

Form form_of(Bytes key) {
  // "fence:{X}": same tag, so same slot; it ends in '}', and every other
  // companion ends in its suffix (a letter), so no other key's companion
  // can be this name.
  if (whole_key_is_tag(key)) return Form::kTagFirst;
  // Wrap only keys with no '{' at all: wrapping a key that has a '{' but
  // no valid tag would create a different tag (not cluster-safe anyway).
  // (memchr(nullptr) is UB even for 0 bytes.)
  if (key.size > 0 && std::memchr(key.data, '{', key.size)) return Form::kAppended;
  return Form::kWrapped;
}

}  // namespace

namespace {

// kTagFirst writes the suffix without its leading ':' (if any).
size_t colon_skip(Bytes suffix) { return suffix.size > 0 && suffix.data[0] == ':' ? 1 : 0; }

}  // namespace

size_t companion_length(Bytes key, Bytes suffix) {
  switch (form_of(key)) {
    case Form::kTagFirst: return suffix.size - colon_skip(suffix) + 1 + key.size;
    case Form::kAppended: return key.size + suffix.size;
    case Form::kWrapped: break;
  }
  return key.size + suffix.size + 2;
}

void append_companion(ByteBuilder& b, Bytes key, Bytes suffix) {
  switch (form_of(key)) {
    case Form::kTagFirst: {
      const size_t skip = colon_skip(suffix);
      b.append(suffix.data + skip, suffix.size - skip);
      b.append_char(':');
      b.append(key);
      return;
    }
    case Form::kAppended:
      b.append(key);
      b.append(suffix);
      return;
    case Form::kWrapped:
      b.append_char('{');
      b.append(key);
      b.append_char('}');
      b.append(suffix);
      return;
  }
}

Result<size_t> companion_key(Bytes key, const char* suffix, uint8_t* out, size_t cap) {
  ByteBuilder b(out, cap);
  append_companion(b, key, Bytes::from_cstr(suffix));
  if (!b.status().ok()) return ErrorCode::kInvalidArgument;
  return b.size();
}

}  // namespace detail
}  // namespace edgelock
