// Decoding a MOVED/ASK error reply, bounded by its length (the text is not
// NUL-terminated: it sits in the receive buffer).
#include "edgelock/detail/redirect.h"

namespace edgelock {
namespace resp {

namespace {

constexpr uint16_t kSlots = 16384;

// Parses decimal digits in [p, end) up to `stop` (or the end); false on no
// digits or a value above `max`.
bool number(const char*& p, const char* end, char stop, uint32_t max, uint32_t* out) {
  const char* start = p;
  uint32_t v = 0;
  for (; p < end && *p != stop; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + static_cast<uint32_t>(*p - '0');
    if (v > max) return false;
  }
  *out = v;
  return p > start;
}

}  // namespace

Redirect decode_redirect(const char* text, size_t len) {
  Redirect r;
  const char* p = text;
  const char* end = text + len;
  while (p < end && *p != ' ') ++p;  // the class word
  if (p == end) return r;
  ++p;
  uint32_t slot = 0;
  if (!number(p, end, ' ', kSlots - 1, &slot) || p == end) return r;
  const char* host = ++p;
  const char* colon = nullptr;
  for (const char* q = host; q < end; ++q) {
    if (*q == ':') colon = q;
    if (*q == ' ') return r;
  }
  if (!colon) return r;
  const char* port_at = colon + 1;
  uint32_t port = 0;
  if (!number(port_at, end, '\0', 65535, &port) || port == 0) return r;
  r.host = Bytes(reinterpret_cast<const uint8_t*>(host), static_cast<size_t>(colon - host));
  r.slot = static_cast<uint16_t>(slot);
  r.port = static_cast<uint16_t>(port);
  r.valid = true;
  return r;
}

}  // namespace resp
}  // namespace edgelock
