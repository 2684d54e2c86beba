// libFuzzer target: the RESP command encoder. The input is split at 0xFF
// bytes into arguments. Invariants: encoded_length() is exact; an encoding
// that fits is one valid RESP array of bulk strings (read back by the
// strict parser, with no size limits) holding exactly the arguments; one
// that does not fit writes nothing and says kBufferTooSmall.
#include <cstdint>
#include <cstring>

#include "fuzz_check.h"
#include "resp/encoder.h"
#include "resp/parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelock;
  if (size == 0) return 0;
  const size_t capacity = 16 + data[0] * 8u;  // 16..2056: fit and overflow
  Bytes args[64];
  size_t count = 0;
  size_t start = 1;
  for (size_t i = 1; i <= size && count < 64; ++i) {
    if (i == size || data[i] == 0xFF) {
      args[count++] = Bytes(data + start, i - start);
      start = i + 1;
    }
  }
  static uint8_t buf[2100];
  ByteBuilder out(buf, capacity);
  const resp::Command cmd{args, count};
  const size_t want = resp::encoded_length(cmd);
  const Status s = resp::encode_command(out, cmd);
  if (!s.ok()) {
    FUZZ_REQUIRE(!(s.code() != ErrorCode::kBufferTooSmall || out.size() != 0 || want <= capacity));
    return 0;
  }
  FUZZ_REQUIRE(!(out.size() != want));
  static Reply nodes[65];
  resp::NodePool pool{nodes, 65, 0};
  const Reply* root = nullptr;
  size_t frame = 0;
  const char* why = nullptr;
  FUZZ_REQUIRE(resp::parse_frame(buf, out.size(), SIZE_MAX, pool, &root, &frame, &why) ==
               resp::Parse::kComplete);
  FUZZ_REQUIRE(frame == out.size() && root->type == ReplyType::kArray && root->count == count);
  for (size_t i = 0; i < count; ++i) {
    const Reply& e = root->elements[i];
    FUZZ_REQUIRE(e.type == ReplyType::kString && e.bytes().equals(args[i]));
  }
  return 0;
}
