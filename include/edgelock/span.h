#pragma once
/// @file span.h
/// A non-owning view of a contiguous array (C++17 has no std::span): a
/// pointer and a count in one value. No heap, no exceptions, no bounds
/// checks beyond what the caller asks for with size().

#include <cstddef>
#include <type_traits>

namespace edgelock {

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

}  // namespace edgelock
