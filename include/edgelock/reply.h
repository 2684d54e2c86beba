#pragma once
/// @file reply.h
/// Replies as read-only views into a fixed per-connection arena. hiredis's
/// reader builds them there through custom reply-object functions, so reading
/// a reply allocates nothing. A reply is valid until the connection's next
/// command.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/limits.h"

namespace edgelock {

enum class ReplyType : uint8_t { kString, kArray, kInteger, kNil, kStatus, kError };

/// One RESP value. Strings point into the arena and are NUL-terminated.
struct Reply {
  ReplyType type = ReplyType::kNil;
  int64_t integer = 0;
  const char* str = nullptr;
  size_t len = 0;
  const Reply* elements = nullptr;
  size_t count = 0;

  Bytes bytes() const { return Bytes(str, len); }
  bool is(ReplyType t) const { return type == t; }
};

/// Fixed storage for one reply: kReplyNodes values and kReplyArenaBytes of
/// string data. Overflow is recorded and reported as kBufferTooSmall.
class ReplyArena {
 public:
  void reset() {
    used_nodes_ = 0;
    used_bytes_ = 0;
    overflow_ = false;
  }
  /// `n` contiguous nodes, or nullptr (and the overflow flag) if full.
  Reply* alloc_nodes(size_t n);
  /// Copies `len` bytes plus a NUL; nullptr (and overflow) if full.
  const char* store(const char* s, size_t len);
  bool overflowed() const { return overflow_; }

 private:
  Reply nodes_[kReplyNodes];
  char bytes_[kReplyArenaBytes];
  size_t used_nodes_ = 0;
  size_t used_bytes_ = 0;
  bool overflow_ = false;
};

}  // namespace edgelock
