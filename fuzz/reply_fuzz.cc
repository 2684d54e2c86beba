// libFuzzer target: bytes from a server into the reply path (resp::Parser
// over its fixed receive buffer, building replies in place). The first byte
// picks the chunk size, so partial reads are exercised too.
// Invariants (trap on violation): no crash/UB/leak; every reply returned is
// well-formed (strings NUL-terminated at their length inside the buffer,
// arrays within the node capacity and depth); reading in chunks gives the
// same replies, and the same error, as parsing the whole input frame by
// frame; a strict prefix of a complete frame is incomplete.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "resp/parser.h"

namespace {

using edgelock::Reply;
using edgelock::ReplyType;
namespace resp = edgelock::resp;

std::string describe(const Reply& r, int depth) {
  FUZZ_REQUIRE(depth <= resp::kMaxReplyDepth);
  switch (r.type) {
    case ReplyType::kInteger: return ":" + std::to_string(r.integer);
    case ReplyType::kNil: return "_";
    case ReplyType::kArray: {
      FUZZ_REQUIRE(r.count < edgelock::kReplyNodes);
      std::string s = "*" + std::to_string(r.count);
      for (size_t i = 0; i < r.count; ++i) s += describe(r.elements[i], depth + 1);
      return s;
    }
    default:
      FUZZ_REQUIRE(r.str && r.str[r.len] == '\0');
      return std::to_string(static_cast<int>(r.type)) + std::to_string(r.len) + "/" +
             std::string(r.str, r.len);
  }
}

// What a reading ended with: replies, then a terminal state.
struct Reading {
  std::vector<std::string> replies;
  std::string end;  // "more" (incomplete or used up), "full", or the error
};

// The reference: the whole input parsed frame by frame, nodes released
// after each (as each command does).
Reading whole(const uint8_t* data, size_t size) {
  Reading out;
  std::vector<uint8_t> bytes(data, data + size);
  static Reply nodes[edgelock::kReplyNodes];
  size_t at = 0;
  while (at < size) {
    resp::NodePool pool{nodes, edgelock::kReplyNodes, 0};
    const Reply* root = nullptr;
    size_t frame = 0;
    const char* why = nullptr;
    const resp::Parse r = resp::parse_frame(
        bytes.data() + at, size - at, edgelock::kMaxReplyStringLen, pool, &root, &frame, &why);
    if (r == resp::Parse::kIncomplete) break;
    if (r != resp::Parse::kComplete) {
      out.end = std::string(r == resp::Parse::kInvalid ? "protocol: " : "too large: ") + why;
      return out;
    }
    FUZZ_REQUIRE(frame >= 3 && frame <= size - at);
    out.replies.push_back(describe(*root, 0));
    // A strict prefix of a whole frame is never complete, never an error.
    std::vector<uint8_t> prefix(data + at, data + at + frame - 1);
    resp::NodePool fresh{nodes, edgelock::kReplyNodes, 0};
    const Reply* ignored = nullptr;
    size_t ignored_len = 0;
    FUZZ_REQUIRE(resp::parse_frame(prefix.data(), prefix.size(), edgelock::kMaxReplyStringLen,
                                   fresh, &ignored, &ignored_len,
                                   &why) == resp::Parse::kIncomplete);
    FUZZ_REQUIRE(fresh.used == 0);
    at += frame;
  }
  out.end = "more";
  return out;
}

// The connection's way: chunks into the parser's free space.
Reading chunked(const uint8_t* data, size_t size, size_t chunk) {
  static resp::Parser parser;  // large: keep it off the fuzzer's stack
  parser.clear();
  Reading out;
  size_t fed = 0;
  for (int rounds = 0; rounds < 100000; ++rounds) {
    size_t avail = 0;
    uint8_t* dst = parser.space(&avail);
    const size_t n = std::min(std::min(chunk, size - fed), avail);
    std::memcpy(dst, data + fed, n);
    parser.commit(n);
    fed += n;
    for (;;) {
      const Reply* r = nullptr;
      const char* why = nullptr;
      const edgelock::Status s = parser.next(&r, &why);
      if (!s.ok()) {
        out.end =
            std::string(s.code() == edgelock::ErrorCode::kProtocol ? "protocol: " : "too large: ") +
            why;
        return out;
      }
      if (!r) break;
      out.replies.push_back(describe(*r, 0));
      parser.release();
    }
    if (n == 0) {
      out.end = fed < size ? "full" : "more";
      return out;
    }
  }
  out.end = "more";
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  ++data;
  --size;
  const Reading a = chunked(data, size, chunk);
  const Reading b = whole(data, size);
  // The buffer may fill before the reference ends (a frame longer than it);
  // up to there both agree.
  FUZZ_REQUIRE(a.replies.size() <= b.replies.size());
  FUZZ_REQUIRE(std::equal(a.replies.begin(), a.replies.end(), b.replies.begin()));
  if (a.end != "full") FUZZ_REQUIRE(a.replies.size() == b.replies.size() && a.end == b.end);
  return 0;
}
