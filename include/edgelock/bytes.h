#pragma once
/// @file bytes.h
/// Non-owning views of binary-safe byte strings, and a byte builder over a
/// caller-owned fixed buffer.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "edgelock/status.h"

namespace edgelock {

/// A non-owning, binary-safe view (may contain NUL, CR, LF, any byte).
struct Bytes {
  const uint8_t* data = nullptr;
  size_t size = 0;

  constexpr Bytes() = default;
  constexpr Bytes(const uint8_t* d, size_t n) : data(d), size(n) {}
  Bytes(const char* d, size_t n) : data(reinterpret_cast<const uint8_t*>(d)), size(n) {}
  /// A view of a NUL-terminated C string (without the terminator).
  static Bytes from_cstr(const char* s) { return Bytes(s, s ? std::strlen(s) : 0); }

  bool empty() const { return size == 0; }
  bool equals(Bytes other) const {
    return size == other.size && (size == 0 || std::memcmp(data, other.data, size) == 0);
  }
};

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
