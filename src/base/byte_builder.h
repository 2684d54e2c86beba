#pragma once
// Internal: appending into a fixed buffer the caller owns (commands, error
// texts, keys), with one overflow check at the end.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/status.h"

namespace edgelock {

/// Appends into a fixed buffer it does not own. Sticky: after the first
/// overflow every append is refused and status() stays kBufferTooSmall, so
/// callers check once at the end (as hiredis does with its error flag).
class ByteBuilder {
 public:
  ByteBuilder(uint8_t* buf, size_t capacity) : buf_(buf), capacity_(capacity) {}

  void append(const void* data, size_t n);
  void append(Bytes b) { append(b.data, b.size); }
  void append_char(char c) { append(&c, 1); }
  /// Appends the decimal form of `v`.
  void append_decimal(int64_t v);

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  const uint8_t* data() const { return buf_; }
  Status status() const { return overflow_ ? Status(ErrorCode::kBufferTooSmall) : Status(); }
  void clear() {
    size_ = 0;
    overflow_ = false;
  }

 private:
  uint8_t* buf_;
  size_t capacity_;
  size_t size_ = 0;
  bool overflow_ = false;
};

/// Number of characters of the decimal form of `v` (sign included).
size_t decimal_length(int64_t v);

}  // namespace edgelock
