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

}  // namespace edgelock
