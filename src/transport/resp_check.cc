// Strict RESP2 framing check; see resp_check.h for why it exists.
#include "transport/resp_check.h"

#include <cstdint>

namespace edgelock {
namespace detail {

namespace {

enum class Line : uint8_t { kFound, kIncomplete, kBadCr, kBadLf };

// Finds the CRLF ending the line that starts at `pos`. A CR not followed by
// LF, or a bare LF, is never valid in a RESP2 header or simple string.
Line find_line_end(const uint8_t* p, size_t n, size_t pos, size_t* end) {
  for (size_t i = pos; i < n; ++i) {
    if (p[i] == '\n') return Line::kBadLf;
    if (p[i] != '\r') continue;
    if (i + 1 >= n) return Line::kIncomplete;
    if (p[i + 1] != '\n') return Line::kBadCr;
    *end = i;
    return Line::kFound;
  }
  return Line::kIncomplete;
}

// A length: exactly "-1" (nil) or a non-negative integer. -2 on error.
int64_t parse_length(const uint8_t* p, size_t n) {
  int64_t v = 0;
  if (!resp_parse_int(p, n, &v) || v < -1) return -2;
  return v;
}

}  // namespace

bool resp_parse_int(const uint8_t* p, size_t n, int64_t* out) {
  size_t i = 0;
  bool neg = false;
  if (n > 0 && p[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == n || n - i > 19) return false;
  // No leading zeros: Redis never sends them and hiredis refuses them (found
  // by fuzz/reply_fuzz.cc: "*00" passed here, failed in hiredis).
  if (p[i] == '0' && n - i > 1) return false;
  uint64_t v = 0;
  for (; i < n; ++i) {
    if (p[i] < '0' || p[i] > '9') return false;
    v = v * 10 + static_cast<uint64_t>(p[i] - '0');  // 19 digits fit in uint64
  }
  if (v > static_cast<uint64_t>(INT64_MAX) || (neg && v == 0)) return false;  // no "-0"
  *out = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

namespace {

// Where the scan is: values still to read at each array depth.
struct Scan {
  size_t pos = 0;
  size_t elements = 0;
  int depth = 0;
  size_t left[kMaxReplyDepth + 1] = {1};
};

// A '$' or '*' header whose text is `len`: skips a bulk payload or opens
// an array level.
RespCheck length_item(const uint8_t* p, size_t n, uint8_t type, int64_t len,
                      const RespLimits& limits, Scan& s, const char** why) {
  if (len == -1) return RespCheck::kComplete;  // nil
  const size_t ulen = static_cast<size_t>(len);
  if (type == '$') {
    if (ulen > limits.max_bulk) return RespCheck::kTooLarge;
    if (n - s.pos < ulen + 2) return RespCheck::kIncomplete;
    if (p[s.pos + ulen] != '\r' || p[s.pos + ulen + 1] != '\n') {
      *why = "bulk string not terminated by CRLF";
      return RespCheck::kInvalid;
    }
    s.pos += ulen + 2;
    return RespCheck::kComplete;
  }
  if (ulen > limits.max_elements - s.elements) return RespCheck::kTooLarge;
  s.elements += ulen;
  if (ulen == 0) return RespCheck::kComplete;
  if (s.depth == kMaxReplyDepth) {
    *why = "arrays nested too deep";
    return RespCheck::kInvalid;
  }
  s.left[++s.depth] = ulen;
  return RespCheck::kComplete;
}

// One value's header line (type byte, text, CRLF) and what follows it.
// kComplete here means "this step is done", not the whole reply.
RespCheck scan_value(const uint8_t* p, size_t n, const RespLimits& limits, Scan& s,
                     const char** why) {
  if (s.pos >= n) return RespCheck::kIncomplete;
  const uint8_t type = p[s.pos++];
  if (type != '+' && type != '-' && type != ':' && type != '$' && type != '*') {
    *why = "unknown type byte";
    return RespCheck::kInvalid;
  }
  size_t end = 0;
  const Line line = find_line_end(p, n, s.pos, &end);
  if (line == Line::kIncomplete) return RespCheck::kIncomplete;
  if (line != Line::kFound) {
    *why = line == Line::kBadCr ? "CR without LF" : "LF without CR";
    return RespCheck::kInvalid;
  }
  const uint8_t* text = p + s.pos;
  const size_t text_len = end - s.pos;
  s.pos = end + 2;
  if (type == '+' || type == '-') return RespCheck::kComplete;
  if (type == ':') {
    int64_t ignored = 0;
    if (resp_parse_int(text, text_len, &ignored)) return RespCheck::kComplete;
    *why = "invalid integer";
    return RespCheck::kInvalid;
  }
  const int64_t len = parse_length(text, text_len);
  if (len == -2) {
    *why = type == '$' ? "invalid bulk length" : "invalid array length";
    return RespCheck::kInvalid;
  }
  return length_item(p, n, type, len, limits, s, why);
}

}  // namespace

RespCheck resp_check(const uint8_t* p, size_t n, const RespLimits& limits, size_t* frame_len,
                     const char** why) {
  Scan s;
  for (;;) {
    while (s.left[s.depth] == 0) {
      if (s.depth == 0) {
        *frame_len = s.pos;
        return RespCheck::kComplete;
      }
      --s.depth;
    }
    --s.left[s.depth];
    const RespCheck r = scan_value(p, n, limits, s, why);
    if (r != RespCheck::kComplete) return r;
  }
}

}  // namespace detail
}  // namespace edgelock
