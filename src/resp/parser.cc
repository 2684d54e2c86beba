// One-pass strict RESP2 parser: see parser.h for the rules and
// edgelock/detail/resp_parser.h for the buffer and reply lifetime.
#include "resp/parser.h"

#include <cstring>

namespace edgelock {
namespace resp {

bool parse_int(const uint8_t* p, size_t n, int64_t* out) {
  size_t i = 0;
  bool neg = false;
  if (n > 0 && p[0] == '-') {
    neg = true;
    i = 1;
  }
  if (i == n || n - i > 19) return false;
  // No leading zeros: Redis never sends them (and hiredis refuses them).
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

// Longest text of an integer or length line: '-' and 19 digits.
constexpr size_t kMaxNumberText = 20;

enum class Line : uint8_t { kFound, kIncomplete, kBadCr, kBadLf, kTooLong };

// Finds the CRLF ending the line whose text starts at `pos` and may be at
// most `max_text` bytes long. A CR not followed by LF, or a bare LF, is never
// valid in a RESP2 header or simple string.
Line find_line_end(const uint8_t* p, size_t n, size_t pos, size_t max_text, size_t* end) {
  const bool capped = n - pos > max_text;  // the last place the CR may be is here
  const size_t stop = capped ? pos + max_text + 1 : n;
  for (size_t i = pos; i < stop; ++i) {
    if (p[i] == '\n') return Line::kBadLf;
    if (p[i] != '\r') continue;
    if (i + 1 >= n) return Line::kIncomplete;
    if (p[i + 1] != '\n') return Line::kBadCr;
    *end = i;
    return Line::kFound;
  }
  return capped ? Line::kTooLong : Line::kIncomplete;
}

// A length: exactly "-1" (nil) or a non-negative integer. -2 on error.
int64_t parse_length(const uint8_t* p, size_t n) {
  int64_t v = 0;
  if (!parse_int(p, n, &v) || v < -1) return -2;
  return v;
}

// Compared before narrowing: on 32-bit targets a size_t cast of a length
// like 2^32 + 1 would wrap to a small, acceptable one.
bool within(int64_t len, size_t limit) { return static_cast<uint64_t>(len) <= limit; }

// The parse in progress: input, position, limits, where nodes come from.
struct Cursor {
  uint8_t* p;
  size_t n;
  size_t pos;
  size_t max_string;
  NodePool* pool;
  const char** why;
};

Parse fail(const Cursor& c, Parse result, const char* why) {
  *c.why = why;
  return result;
}

Reply* take_nodes(NodePool& pool, size_t n) {
  if (n > pool.capacity - pool.used) return nullptr;
  Reply* r = pool.nodes + pool.used;
  for (size_t i = 0; i < n; ++i) r[i] = Reply();
  pool.used += n;
  return r;
}

bool is_resp3_type(uint8_t t) { return std::memchr("_,#!=(%~>|", t, 10) != nullptr; }

// Why a header or simple-string line was not found whole.
Parse line_failure(const Cursor& c, uint8_t type, Line line) {
  switch (line) {
    case Line::kBadCr: return fail(c, Parse::kInvalid, "CR without LF");
    case Line::kBadLf: return fail(c, Parse::kInvalid, "LF without CR");
    case Line::kTooLong: break;
    default: return Parse::kIncomplete;
  }
  switch (type) {
    case '+': return fail(c, Parse::kTooLarge, "status line longer than the string capacity");
    case ':': return fail(c, Parse::kInvalid, "invalid integer");
    case '$': return fail(c, Parse::kInvalid, "invalid bulk length");
    default: return fail(c, Parse::kInvalid, "invalid array length");
  }
}

// "$<len>\r\n<payload>\r\n" once the header text is known.
Parse read_bulk(Cursor& c, Reply* slot, const uint8_t* text, size_t text_len) {
  const int64_t len = parse_length(text, text_len);
  if (len == -2) return fail(c, Parse::kInvalid, "invalid bulk length");
  if (len == -1) return Parse::kComplete;  // nil: the slot already is
  if (!within(len, c.max_string)) {
    return fail(c, Parse::kTooLarge, "bulk string longer than the string capacity");
  }
  const size_t ulen = static_cast<size_t>(len);
  if (c.n - c.pos < ulen + 2) return Parse::kIncomplete;
  if (c.p[c.pos + ulen] != '\r' || c.p[c.pos + ulen + 1] != '\n') {
    return fail(c, Parse::kInvalid, "bulk string not terminated by CRLF");
  }
  slot->type = ReplyType::kString;
  slot->str = reinterpret_cast<const char*>(c.p + c.pos);
  slot->len = ulen;
  c.pos += ulen + 2;
  return Parse::kComplete;
}

// "*<count>\r\n": an array of n > 0 takes its n element nodes now, in one
// block (*children); the values that follow fill them.
Parse read_array(Cursor& c, Reply* slot, const uint8_t* text, size_t text_len, Reply** children) {
  const int64_t len = parse_length(text, text_len);
  if (len == -2) return fail(c, Parse::kInvalid, "invalid array length");
  if (len == -1) return Parse::kComplete;  // nil array: a nil reply
  slot->type = ReplyType::kArray;
  if (len == 0) return Parse::kComplete;
  Reply* elements = within(len, c.pool->capacity - c.pool->used)
                        ? take_nodes(*c.pool, static_cast<size_t>(len))
                        : nullptr;
  if (!elements) return fail(c, Parse::kTooLarge, "more values than the reply node capacity");
  slot->elements = elements;
  slot->count = static_cast<size_t>(len);
  *children = elements;
  return Parse::kComplete;
}

// One value into `slot`: its header line (type byte, text, CRLF) and, for a
// bulk string, its payload.
Parse read_value(Cursor& c, Reply* slot, Reply** children) {
  if (c.pos >= c.n) return Parse::kIncomplete;
  const uint8_t type = c.p[c.pos];
  if (std::memchr("+-:$*", type, 5) == nullptr) {
    return fail(c, Parse::kInvalid, is_resp3_type(type) ? "RESP3 type byte" : "unknown type byte");
  }
  const size_t max_text = type == '-' ? SIZE_MAX : type == '+' ? c.max_string : kMaxNumberText;
  size_t end = 0;
  const Line line = find_line_end(c.p, c.n, c.pos + 1, max_text, &end);
  if (line != Line::kFound) return line_failure(c, type, line);
  uint8_t* text = c.p + c.pos + 1;
  const size_t text_len = end - (c.pos + 1);
  c.pos = end + 2;
  if (type == '$') return read_bulk(c, slot, text, text_len);
  if (type == '*') return read_array(c, slot, text, text_len, children);
  if (type == ':') {
    if (!parse_int(text, text_len, &slot->integer)) {
      return fail(c, Parse::kInvalid, "invalid integer");
    }
    slot->type = ReplyType::kInteger;
    return Parse::kComplete;
  }
  // A simple string; an error keeps a bounded prefix (its class word first).
  slot->type = type == '+' ? ReplyType::kStatus : ReplyType::kError;
  slot->str = reinterpret_cast<const char*>(text);
  slot->len = type == '-' && text_len >= kErrorTextSize ? kErrorTextSize - 1 : text_len;
  return Parse::kComplete;
}

// The whole value tree under `root`, depth first; levels[d] counts the
// values still due at depth d.
Parse read_tree(Cursor& c, Reply* root) {
  struct Level {
    Reply* next;
    size_t left;
  };
  Level levels[kMaxReplyDepth + 1];
  int depth = 0;
  levels[0] = {root, 1};
  for (;;) {
    while (levels[depth].left == 0) {
      if (depth == 0) return Parse::kComplete;
      --depth;
    }
    Reply* slot = levels[depth].next++;
    --levels[depth].left;
    Reply* children = nullptr;
    const Parse r = read_value(c, slot, &children);
    if (r != Parse::kComplete) return r;
    if (!children) continue;
    if (depth == kMaxReplyDepth) return fail(c, Parse::kInvalid, "arrays nested too deep");
    levels[++depth] = {children, slot->count};
  }
}

}  // namespace

Parse parse_frame(uint8_t* p, size_t n, size_t max_string, NodePool& pool, const Reply** out,
                  size_t* frame_len, const char** why) {
  const size_t mark = pool.used;
  Cursor c{p, n, 0, max_string, &pool, why};
  Reply* root = take_nodes(pool, 1);
  const Parse r = root ? read_tree(c, root)
                       : fail(c, Parse::kTooLarge, "more values than the reply node capacity");
  if (r != Parse::kComplete) {
    pool.used = mark;
    return r;
  }
  // Strings end in place only now: an incomplete parse must leave the
  // bytes as they came, since it runs again once more have arrived.
  for (size_t i = mark; i < pool.used; ++i) {
    const Reply& node = pool.nodes[i];
    const bool text = node.type == ReplyType::kString || node.type == ReplyType::kStatus ||
                      node.type == ReplyType::kError;
    if (text) p[static_cast<size_t>(node.str - reinterpret_cast<const char*>(p)) + node.len] = 0;
  }
  *out = root;
  *frame_len = c.pos;
  return r;
}

uint8_t* Parser::space(size_t* avail) {
  // Live replies point into the buffer: it moves only once they are over.
  if (!live_ && start_ > 0) {
    std::memmove(buf_, buf_ + start_, end_ - start_);  // the unread rest, usually nothing
    end_ -= start_;
    start_ = 0;
  }
  *avail = sizeof buf_ - end_;
  return buf_ + end_;
}

void Parser::commit(size_t n) { end_ += n < sizeof buf_ - end_ ? n : sizeof buf_ - end_; }

Status Parser::next(const Reply** out, const char** why) {
  *out = nullptr;
  if (start_ == end_) return Status();
  NodePool pool{nodes_, kReplyNodes, used_nodes_};
  size_t frame = 0;
  switch (parse_frame(buf_ + start_, end_ - start_, kMaxReplyStringLen, pool, out, &frame, why)) {
    case Parse::kIncomplete: return Status();
    case Parse::kInvalid: return ErrorCode::kProtocol;
    case Parse::kTooLarge: return ErrorCode::kBufferTooSmall;
    case Parse::kComplete: break;
  }
  used_nodes_ = pool.used;
  start_ += frame;
  live_ = true;
  return Status();
}

void Parser::release() {
  used_nodes_ = 0;
  live_ = false;
  if (start_ == end_) start_ = end_ = 0;
}

void Parser::clear() {
  used_nodes_ = 0;
  live_ = false;
  start_ = end_ = 0;
}

}  // namespace resp
}  // namespace edgelock
