#pragma once
// A strict RESP2 framing check (private), run on the receive buffer before
// hiredis parses it. hiredis 0.14 trusts its input: ":abc" parses as -1,
// "$-5" as nil, "$3\r\nabcXY" skips the missing CRLF, and overlong digit runs
// overflow a signed integer. A lock must fail closed on such bytes, so every
// value is checked here first, and hiredis only ever sees complete, valid
// frames. Pure function over bytes: fuzzed in fuzz/reply_fuzz.cc.

#include <cstddef>
#include <cstdint>

namespace edgelock {
namespace detail {

enum class RespCheck : uint8_t {
  kComplete,    ///< One whole valid value; *frame_len says how long.
  kIncomplete,  ///< Valid so far; more bytes are needed.
  kInvalid,     ///< Not RESP2 (text in *why).
  kTooLarge,    ///< Valid, but longer or wider than the fixed capacities.
};

struct RespLimits {
  size_t max_bulk = 0;      ///< Longest bulk string.
  size_t max_elements = 0;  ///< Array elements in one reply, all levels.
};

/// Deepest array nesting accepted (the root is depth 0). hiredis 0.14 stops
/// at depth 7; we stop one level earlier so its limit is never reached.
constexpr int kMaxReplyDepth = 6;

/// Checks the first RESP2 value in [p, p + n). Bounded: every step consumes
/// at least three bytes. Never reads outside the range.
RespCheck resp_check(const uint8_t* p, size_t n, const RespLimits& limits, size_t* frame_len,
                     const char** why);

/// Parses a RESP integer line strictly: optional '-', 1..19 digits, within
/// [-INT64_MAX, INT64_MAX], no "-0", no leading zeros. False otherwise.
bool resp_parse_int(const uint8_t* p, size_t n, int64_t* out);

}  // namespace detail
}  // namespace edgelock
