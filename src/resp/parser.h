#pragma once
// Strict one-pass RESP2 parsing (private). The Parser class that owns a
// connection's receive buffer is declared in edgelock/detail/resp_parser.h;
// this is the frame-level core it runs, exposed for the unit tests and the
// fuzz targets.
//
// Strict, because a lock must fail closed on a reply it cannot be sure of:
// integers and lengths are exact decimal (no sign other than a leading '-',
// no leading zeros, no "-0", within int64), every line ends in CRLF with no
// bare CR or LF anywhere in a header or simple string, a bulk string is
// followed by exactly CRLF, arrays nest at most kMaxReplyDepth deep, and any
// type byte other than + - : $ * (RESP3's included) is refused.

#include <cstddef>
#include <cstdint>

#include "edgelock/detail/resp_parser.h"
#include "edgelock/reply.h"

namespace edgelock {
namespace resp {

enum class Parse : uint8_t {
  kComplete,    ///< One whole valid value; *frame_len says how long.
  kIncomplete,  ///< Valid so far; more bytes are needed.
  kInvalid,     ///< Not strict RESP2 (text in *why).
  kTooLarge,    ///< Valid, but longer or wider than the limits (text in *why).
};

/// Deepest array nesting accepted (the root is depth 0). Replies we read
/// nest at most 3 deep (CLUSTER SLOTS, ROLE); the bound keeps the parser's
/// stack fixed and small.
constexpr int kMaxReplyDepth = 6;

/// Where a parse takes its nodes from: `capacity` nodes at `nodes`, of
/// which `used` are taken.
struct NodePool {
  Reply* nodes = nullptr;
  size_t capacity = 0;
  size_t used = 0;
};

/// Parses the first RESP2 value in [p, p + n) in one pass. kComplete: *out
/// is the root, built from `pool`, strings point into [p, p + *frame_len)
/// and are NUL-terminated there in place (the CR after a string, or the
/// byte after an error's kept prefix, becomes NUL). Any other result leaves
/// the bytes and pool.used as they were. Strings longer than `max_string`
/// (errors excepted: they keep a prefix) and values beyond the pool are
/// kTooLarge. Never reads outside [p, p + n); every step consumes at least
/// three bytes.
Parse parse_frame(uint8_t* p, size_t n, size_t max_string, NodePool& pool, const Reply** out,
                  size_t* frame_len, const char** why);

/// Parses a RESP integer line strictly: optional '-', 1..19 digits, within
/// [-INT64_MAX, INT64_MAX], no "-0", no leading zeros. False otherwise.
bool parse_int(const uint8_t* p, size_t n, int64_t* out);

}  // namespace resp
}  // namespace edgelock
