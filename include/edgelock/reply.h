#pragma once
/// @file reply.h
/// Replies as read-only views. The connection's RESP parser builds them in
/// one pass over its fixed receive buffer: the nodes live in a fixed node
/// array and strings point into the received bytes, NUL-terminated in
/// place, so reading a reply allocates and copies nothing.
///
/// Lifetime: a reply (its nodes and strings) stays valid until the next
/// command starts on the same connection, or the connection closes.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/limits.h"

namespace edgelock {

enum class ReplyType : uint8_t { kString, kArray, kInteger, kNil, kStatus, kError };

/// One RESP value. Strings (kString, kStatus, kError) are NUL-terminated at
/// str[len] and may contain NUL bytes before it (bulk strings are binary
/// safe). An error keeps at most its first kErrorTextSize - 1 bytes: enough
/// for its class word and a message, however long the server's text.
///
/// Compact (16 bytes on 32-bit targets): the fields of the other types
/// share storage, so read only those of `type` (integer for kInteger; str
/// and len for strings; elements and count for kArray). A nil reply reads
/// as a null str of length 0, an empty array as count 0.
struct Reply {
  union {
    int64_t integer = 0;    ///< kInteger.
    const char* str;        ///< kString, kStatus, kError.
    const Reply* elements;  ///< kArray: count nodes.
  };
  union {
    size_t len = 0;  ///< Strings: bytes before the NUL.
    size_t count;    ///< kArray: elements.
  };
  ReplyType type = ReplyType::kNil;

  Bytes bytes() const { return Bytes(str, len); }
  bool is(ReplyType t) const { return type == t; }
};

}  // namespace edgelock
