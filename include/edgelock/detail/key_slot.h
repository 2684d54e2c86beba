#pragma once
/// @file detail/key_slot.h
/// Internal: not part of the public API.
/// Redis Cluster key slots, computed at compile time where the key is a
/// constant: CRC16/XMODEM (poly 0x1021, init 0) of the key's hash tag (the
/// bytes between the first '{' and the first '}' after it, if non-empty)
/// or of the whole key, modulo 16384.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"

namespace edgelock {

/// Number of hash slots in a Redis Cluster.
constexpr uint16_t kClusterSlots = 16384;

namespace detail {

struct Crc16Table {
  uint16_t v[256] = {};
  constexpr Crc16Table() {
    for (int i = 0; i < 256; ++i) {
      uint16_t crc = static_cast<uint16_t>(i << 8);
      for (int b = 0; b < 8; ++b) {
        crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
      }
      v[i] = crc;
    }
  }
};

constexpr Crc16Table kCrc16Table{};

}  // namespace detail

/// CRC16/XMODEM of `n` bytes at `p` (the checksum Redis Cluster uses).
constexpr uint16_t crc16(const char* p, size_t n) {
  uint16_t crc = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t idx = static_cast<uint8_t>((crc >> 8) ^ static_cast<uint8_t>(p[i]));
    crc = static_cast<uint16_t>((crc << 8) ^ detail::kCrc16Table.v[idx]);
  }
  return crc;
}

/// The cluster slot of a key of `n` bytes, honouring hash tags exactly as
/// Redis does ("{user1000}.following" and "{user1000}.followers" share one;
/// "{}x" and "a{b" hash as whole keys).
constexpr uint16_t key_slot(const char* p, size_t n) {
  size_t open = 0;
  while (open < n && p[open] != '{') ++open;
  if (open < n) {
    size_t close = open + 1;
    while (close < n && p[close] != '}') ++close;
    if (close < n && close > open + 1) return crc16(p + open + 1, close - open - 1) & 0x3FFF;
  }
  return crc16(p, n) & 0x3FFF;
}

/// The slot of a NUL-terminated key (for constants: key_slot("foo") == 12182).
constexpr uint16_t key_slot(const char* key) {
  size_t n = 0;
  while (key[n]) ++n;
  return key_slot(key, n);
}

/// The slot of a binary-safe key.
inline uint16_t key_slot(Bytes key) {
  return key_slot(reinterpret_cast<const char*>(key.data), key.size);
}

}  // namespace edgelock
