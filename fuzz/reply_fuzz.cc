// libFuzzer target: bytes from a server into the reply path (strict RESP
// check + hiredis reader building replies in the fixed arena). The first
// byte picks the chunk size, so partial reads are exercised too.
// Invariants (trap on violation): no crash/UB/leak; every reply returned is
// well-formed (string data NUL-terminated inside its length, arrays within
// the node capacity); a value resp_check() calls complete is parsed by
// hiredis without a protocol error.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include <cstring>

#include "transport/reader.h"
#include "transport/resp_check.h"

namespace {

using edgelock::Reply;
using edgelock::ReplyType;

void check(const Reply& r, int depth) {
  FUZZ_REQUIRE(!(depth > edgelock::detail::kMaxReplyDepth));
  if (r.type == ReplyType::kString || r.type == ReplyType::kStatus || r.type == ReplyType::kError) {
    FUZZ_REQUIRE(!(!r.str || r.str[r.len] != '\0'));
  }
  if (r.type == ReplyType::kArray) {
    FUZZ_REQUIRE(!(r.count > edgelock::kReplyNodes));
    for (size_t i = 0; i < r.count; ++i) check(r.elements[i], depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelock;
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 64;
  ++data;
  --size;
  static ReplyArena arena;  // large: keep it off the fuzzer's stack
  void* reader = detail::reader_create(&arena, kRxBufferSize);
  if (!reader) return 0;
  char err[kErrorTextSize] = {};
  size_t fed = 0;
  bool done = false;
  arena.reset();
  for (int rounds = 0; !done && rounds < 100000; ++rounds) {
    size_t avail = 0;
    uint8_t* dst = detail::reader_space(reader, &avail);
    const size_t n = std::min(std::min(chunk, size - fed), avail);
    if (n > 0) {
      std::memcpy(dst, data + fed, n);
      detail::reader_commit(reader, n);
      fed += n;
    }
    for (;;) {
      const Result<const Reply*> r = detail::reader_next(reader, arena, err);
      if (!r.ok()) {
        done = true;
        break;
      }
      if (!r.value()) break;
      check(*r.value(), 0);
      arena.reset();
    }
    if (n == 0) done = true;  // input used up or buffer full
  }
  detail::reader_free(reader);

  // resp_check on the whole input: a complete verdict must be parseable.
  detail::RespLimits lim;
  lim.max_bulk = kRxBufferSize;
  lim.max_elements = kReplyNodes - 1;
  size_t frame = 0;
  const char* why = nullptr;
  if (size <= kRxBufferSize &&
      detail::resp_check(data, size, lim, &frame, &why) == detail::RespCheck::kComplete) {
    FUZZ_REQUIRE(!(frame == 0 || frame > size));
    void* r2 = detail::reader_create(&arena, kRxBufferSize);
    size_t avail = 0;
    uint8_t* dst = detail::reader_space(r2, &avail);
    std::memcpy(dst, data, frame);
    detail::reader_commit(r2, frame);
    arena.reset();
    const Result<const Reply*> r = detail::reader_next(r2, arena, err);
    const bool arena_full = !r.ok() && r.status().code() == ErrorCode::kBufferTooSmall;
    FUZZ_REQUIRE(!(!arena_full && (!r.ok() || !r.value())));
    FUZZ_REQUIRE(!(detail::reader_pending(r2) != 0 && r.ok()));
    detail::reader_free(r2);
  }
  return 0;
}
