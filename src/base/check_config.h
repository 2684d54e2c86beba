#pragma once
// Build-time checks of the capacities (limits.h, generated config.h), in
// the manner of Mbed TLS's check_config.h: a combination the code cannot
// work with fails the build with a message that names the Meson option to
// change, and the compiler's note shows the smallest value that works
// ("with kMinimum = N"). The library's sources include it (through
// src/primitives/eval_capacity.h): config.h is generated with the library, so a program
// using it sees the same values. The check that needs the
// library's own scripts (the longest EVAL against tx_buffer_size) is in
// src/primitives/eval_capacity.h and uses buffer_at_least() below.

#include <cstddef>

#include "edgelock/limits.h"

namespace edgelock {
namespace config_check {

// Digits of `n` in decimal.
constexpr size_t decimal_digits(size_t n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

// RESP2 frame sizes: "$<n>\r\n<n bytes>\r\n", "*<n>\r\n", and the longest
// integer ":-9223372036854775808\r\n".
constexpr size_t bulk_frame(size_t n) { return 1 + decimal_digits(n) + 2 + n + 2; }
constexpr size_t array_header(size_t n) { return 1 + decimal_digits(n) + 2; }
constexpr size_t kMaxIntegerFrame = 1 + 20 + 2;
constexpr size_t max_of(size_t a, size_t b) { return a > b ? a : b; }

// The bound for the receive buffer: an array of kReplyNodes - 1 values,
// all integers at their longest (23 bytes) but one string at the longest
// the parser accepts (kMaxReplyStringLen). Every reply a primitive parses
// is shorter: at most one long string (a host name, a token, a script's
// text answer) next to integers and short strings:
// script replies (integers, arrays of a few integers and tokens), CLUSTER
// SLOTS pages (14 values, src/backends/cluster_map.cc), SENTINEL
// get-master-addr-by-name (2 strings), ROLE (up to 3 replicas: 16 values).
// Error replies are the one kind not bounded here (their text is cut to
// kErrorTextSize, but the frame is read whole): a longer one
// than the buffer fails with kBufferTooSmall; Redis's are a line or two.
constexpr size_t kLongestReplyFrame =
    kReplyNodes < 2 ? max_of(kMaxIntegerFrame, bulk_frame(kMaxReplyStringLen))
                    : array_header(kReplyNodes - 1) + (kReplyNodes - 2) * kMaxIntegerFrame +
                          bulk_frame(kMaxReplyStringLen);

// The longest command with fixed-size arguments the library sends: AUTH
// user password at their capacities (SENTINEL get-master-addr-by-name is
// shorter). Commands carrying a key are shorter than the EVAL that
// carries the same key: src/primitives/eval_capacity.h checks those.
constexpr size_t kLongestFixedCommand =
    max_of(array_header(3) + bulk_frame(4) + bulk_frame(kMaxUserLen) + bulk_frame(kMaxPasswordLen),
           array_header(3) + bulk_frame(8) + bulk_frame(23) + bulk_frame(kMaxMasterNameLen));

// The two fixed buffers of a connection.
enum class Buffer { kTx, kRx };

// Fails the build, naming the Meson option, when buffer `kWhich` is
// smaller than kMinimum bytes (shown in the compiler's note).
template <Buffer kWhich, size_t kMinimum, size_t kConfigured>
constexpr bool buffer_at_least() {
  static_assert(kWhich != Buffer::kTx || kConfigured >= kMinimum,
                "tx_buffer_size is too small for the longest command the library sends: "
                "raise the Meson option tx_buffer_size to at least kMinimum (see the note)");
  static_assert(kWhich != Buffer::kRx || kConfigured >= kMinimum,
                "rx_buffer_size is too small for the longest reply a primitive parses: "
                "raise the Meson option rx_buffer_size to at least kMinimum (see the note)");
  return true;
}

static_assert(buffer_at_least<Buffer::kTx, kLongestFixedCommand, kTxBufferSize>(),
              "tx_buffer_size");
static_assert(buffer_at_least<Buffer::kRx, kLongestReplyFrame, kRxBufferSize>(), "rx_buffer_size");

// Companion keys ("{key}:fence") and the tests' keys need room, and a key
// longer than a few KB would make every buffer above large.
static_assert(kMaxKeyLen >= 16 && kMaxKeyLen <= 4096,
              "max_key_len must be 16..4096: change the Meson option max_key_len");
// Nothing in the quorum code packs servers into bits; the bound keeps the
// fan-out's per-round stack arrays (16 bytes a server) under 1 KB.
static_assert(kMaxQuorumServers >= 1 && kMaxQuorumServers <= 64,
              "max_quorum_servers must be 1..64: change the Meson option max_quorum_servers");
// The queue's length is kept in a byte.
static_assert(kMaxQueuedHandles >= 1 && kMaxQueuedHandles <= 64,
              "max_queued_handles must be 1..64: change the Meson option max_queued_handles");
// Cluster stores each slot's owner in a byte, with 255 meaning "none".
static_assert(kMaxClusterNodes >= 1 && kMaxClusterNodes <= 254,
              "max_cluster_nodes must be 1..254: change the Meson option max_cluster_nodes");

}  // namespace config_check
}  // namespace edgelock
