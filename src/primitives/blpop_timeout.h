#pragma once
// BLPOP's timeout argument (private), shared by the waits of Lock and
// FairLock.

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "base/byte_builder.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"

namespace edgelock {
namespace detail {

/// BLPOP's timeout in seconds with ms precision ("1.250") into *out,
/// rounded down so the server gives up before our own deadline does. False
/// (and *out untouched) if under 1 ms.
inline bool blpop_timeout(Nanos cap, DecimalText* out) {
  const int64_t ms = std::chrono::floor<Millis>(cap).count();
  if (ms < 1) return false;
  ByteBuilder b(reinterpret_cast<uint8_t*>(out->text), sizeof out->text);
  b.append_decimal(ms / 1000);
  // The fraction as three digits: 1000 + ms % 1000 without its leading 1.
  const DecimalText frac(1000 + ms % 1000);
  b.append_char('.');
  b.append(frac.text + 1, 3);
  out->len = static_cast<uint8_t>(b.size());
  return true;
}

/// The same text held by value; len 0 if under 1 ms.
struct BlpopTimeout {
  DecimalText text;
  size_t len;
  explicit BlpopTimeout(Nanos cap) : len(blpop_timeout(cap, &text) ? text.len : 0) {}
  Bytes bytes() const { return len ? text.bytes() : Bytes(); }
};

}  // namespace detail
}  // namespace edgelock
