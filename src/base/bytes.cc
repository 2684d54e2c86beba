#include "base/byte_builder.h"

namespace edgelock {

void ByteBuilder::append(const void* data, size_t n) {
  if (overflow_) return;
  if (n > capacity_ - size_) {
    overflow_ = true;
    return;
  }
  if (n) std::memcpy(buf_ + size_, data, n);
  size_ += n;
}

size_t decimal_length(int64_t v) {
  // Work on the unsigned magnitude so INT64_MIN does not overflow.
  uint64_t m = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  size_t n = v < 0 ? 2 : 1;
  while (m >= 10) {
    m /= 10;
    ++n;
  }
  return n;
}

void ByteBuilder::append_decimal(int64_t v) {
  char tmp[24];
  size_t n = decimal_length(v);
  uint64_t m = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  size_t i = n;
  do {
    tmp[--i] = static_cast<char>('0' + m % 10);
    m /= 10;
  } while (m != 0);
  if (v < 0) tmp[0] = '-';
  append(tmp, n);
}

}  // namespace edgelock
