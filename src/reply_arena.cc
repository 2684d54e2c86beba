#include <cstring>

#include "edgelock/reply.h"

namespace edgelock {

Reply* ReplyArena::alloc_nodes(size_t n) {
  if (n > kReplyNodes - used_nodes_) {
    overflow_ = true;
    return nullptr;
  }
  Reply* r = &nodes_[used_nodes_];
  for (size_t i = 0; i < n; ++i) r[i] = Reply();
  used_nodes_ += n;
  return r;
}

const char* ReplyArena::store(const char* s, size_t len) {
  if (len >= kReplyArenaBytes - used_bytes_) {
    overflow_ = true;
    return nullptr;
  }
  char* dst = &bytes_[used_bytes_];
  if (len) std::memcpy(dst, s, len);
  dst[len] = '\0';
  used_bytes_ += len + 1;
  return dst;
}

}  // namespace edgelock
