#pragma once
/// @file bytes.h
/// Non-owning views (Span: an array; Bytes: a binary-safe byte string) and
/// decimal text kept in place.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "edgelock/clock.h"

namespace edgelock {

/// A non-owning view of a contiguous array (C++17 has no std::span): a
/// pointer and a count in one value. No heap, no exceptions, no bounds
/// checks beyond what the caller asks for with size().
template <typename T>
class Span {
 public:
  /// Empty.
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  /// The whole of a C array (implicit, so `keys` converts where a span is wanted).
  template <size_t N>
  constexpr Span(T (&array)[N]) : data_(array), size_(N) {}
  /// Span<U> -> Span<const U>.
  template <typename U, typename = std::enable_if_t<std::is_same<const U, T>::value &&
                                                    !std::is_same<U, T>::value>>
  constexpr Span(Span<U> other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  /// The caller keeps i < size().
  constexpr T& operator[](size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

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

namespace detail {

/// Internal: the one integer-to-text helper of the primitives. Script
/// arguments are decimal text (TTLs in whole ms, counts, fences), kept in
/// place with no heap.
struct DecimalText {
  char text[20] = {};  // INT64_MIN is 20 characters; no terminator
  uint8_t len = 0;

  DecimalText() { set(0); }
  explicit DecimalText(int64_t v) { set(v); }
  /// A duration as the server counts it: whole ms.
  explicit DecimalText(Millis d) { set(static_cast<int64_t>(d.count())); }
  /// Writes `v` (src/lease/lease_core.cc).
  void set(int64_t v);
  Bytes bytes() const { return Bytes(text, len); }
};

}  // namespace detail
}  // namespace edgelock
