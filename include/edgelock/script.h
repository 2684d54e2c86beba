#pragma once
/// @file script.h
/// A Lua script with its SHA-1 computed at compile time, so EVALSHA needs
/// no SCRIPT LOAD round trip and no runtime hashing; and one call of a
/// script as a value (ScriptCall).

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"

namespace edgelock {

struct Script {
  const char* body = nullptr;
  size_t len = 0;
  char sha1[41] = {};  ///< Lower-case hex, NUL-terminated.
};

namespace detail {

constexpr uint32_t rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

constexpr size_t const_strlen(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

// The byte at `i` of the padded SHA-1 message of `s` (length n, padded to total).
constexpr uint8_t sha1_pad_byte(const char* s, size_t n, size_t total, size_t i) {
  if (i < n) return static_cast<uint8_t>(s[i]);
  if (i == n) return 0x80;
  if (i >= total - 8) {
    return static_cast<uint8_t>((static_cast<uint64_t>(n) * 8) >> (8 * (total - 1 - i)));
  }
  return 0;
}

constexpr void sha1_block(uint32_t (&h)[5], const char* s, size_t n, size_t total, size_t off) {
  uint32_t w[80] = {};
  for (size_t i = 0; i < 64; ++i) {
    w[i / 4] |= static_cast<uint32_t>(sha1_pad_byte(s, n, total, off + i)) << (24 - 8 * (i % 4));
  }
  for (size_t i = 16; i < 80; ++i) w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (size_t i = 0; i < 80; ++i) {
    uint32_t f = 0, k = 0;
    if (i < 20) {
      f = (b & c) | (~b & d), k = 0x5A827999u;
    } else if (i < 40) {
      f = b ^ c ^ d, k = 0x6ED9EBA1u;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDCu;
    } else {
      f = b ^ c ^ d, k = 0xCA62C1D6u;
    }
    const uint32_t t = rotl(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rotl(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

}  // namespace detail

/// Builds a Script from a string literal, hashing it at compile time.
constexpr Script make_script(const char* body) {
  Script s{};
  s.body = body;
  s.len = detail::const_strlen(body);
  uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
  const size_t total = ((s.len + 8) / 64 + 1) * 64;
  for (size_t off = 0; off < total; off += 64) detail::sha1_block(h, body, s.len, total, off);
  const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < 40; ++i) s.sha1[i] = hex[(h[i / 8] >> (28 - 4 * (i % 8))) & 0xF];
  s.sha1[40] = '\0';
  return s;
}

/// One script call: the script, its keys and its arguments. Holds views
/// only: the caller keeps the arrays (and the script) alive until the
/// call's reply is read, which for a non-blocking or pipelined call is
/// after the call that started it has returned.
// Every member has a default, so a brace list may stop early ({&script})
// without -Wmissing-field-initializers.
struct ScriptCall {
  /// Null: a plain command, its words in `args` (Connection::eval()).
  const Script* script = nullptr;
  /// KEYS[1..]: every key of one call shares one server (and cluster slot).
  Span<const Bytes> keys = {};
  /// ARGV[1..].
  Span<const Bytes> args = {};
  /// The script writes, and a positive integer reply means it granted or
  /// extended a lease: a replicated back end may confirm it with its
  /// replicas (WAIT) before reporting success.
  bool writes_lease = false;
  /// The library's companion keys, named when the call is encoded: after
  /// `keys`, one more key per suffix here, the companion of keys[0] with it
  /// (":fence" makes "{key}:fence"; hash tags keep the slot). Empty for
  /// other callers' scripts. Needs a non-empty `keys`.
  Span<const Bytes> companions = {};
};

}  // namespace edgelock
