#pragma once
// BLPOP's timeout argument (private), shared by the waits of Lock and
// FairLock.

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/decimal_text.h"

namespace edgelock {
namespace detail {

/// BLPOP's timeout in seconds with ms precision ("1.250"), rounded down so
/// the server gives up before our own deadline does. Empty if under 1 ms.
struct BlpopTimeout {
  uint8_t text[32] = {};
  size_t len = 0;
  explicit BlpopTimeout(Nanos cap) {
    const int64_t ms = std::chrono::floor<Millis>(cap).count();
    if (ms < 1) return;
    ByteBuilder b(text, sizeof text);
    b.append_decimal(ms / 1000);
    // The fraction as three digits: 1000 + ms % 1000 without its leading 1.
    const DecimalText frac(1000 + ms % 1000);
    b.append_char('.');
    b.append(frac.text + 1, 3);
    len = b.size();
  }
  Bytes bytes() const { return Bytes(text, len); }
};

}  // namespace detail
}  // namespace edgelock
