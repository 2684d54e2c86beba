#pragma once
// Internal: the one integer-to-text helper of the primitives. Script
// arguments are decimal text (TTLs in whole ms, counts, fences), kept in
// place with no heap; written by ByteBuilder::append_decimal, as the RESP
// encoder writes its lengths.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"

namespace edgelock {
namespace detail {

struct DecimalText {
  char text[20] = {};  // INT64_MIN is 20 characters; no terminator
  uint8_t len = 0;

  DecimalText() { set(0); }
  explicit DecimalText(int64_t v) { set(v); }
  /// A duration as the server counts it: whole ms.
  explicit DecimalText(Millis d) { set(static_cast<int64_t>(d.count())); }
  /// Writes `v` (src/lease_core.cc).
  void set(int64_t v);
  Bytes bytes() const { return Bytes(text, len); }
};

}  // namespace detail
}  // namespace edgelock
