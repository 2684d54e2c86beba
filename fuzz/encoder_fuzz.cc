// libFuzzer target: the RESP command encoder. The input is split at 0xFF
// bytes into arguments. Invariants: encoded_length() is exact; an encoding
// that fits is one valid RESP array of bulk strings (checked by the strict
// reply checker) with the same arguments; one that does not fit writes
// nothing and says kBufferTooSmall.
#include <cstdint>

#include "fuzz_check.h"
#include <cstring>

#include "resp_encoder.h"
#include "transport/resp_check.h"

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
  const Command cmd{args, count};
  const size_t want = encoded_length(cmd);
  const Status s = encode_command(out, cmd);
  if (!s.ok()) {
    FUZZ_REQUIRE(!(s.code() != ErrorCode::kBufferTooSmall || out.size() != 0 || want <= capacity));
    return 0;
  }
  FUZZ_REQUIRE(!(out.size() != want));
  detail::RespLimits lim;
  lim.max_bulk = SIZE_MAX / 4;
  lim.max_elements = SIZE_MAX / 4;
  size_t frame = 0;
  const char* why = nullptr;
  FUZZ_REQUIRE(!(detail::resp_check(buf, out.size(), lim, &frame, &why) != detail::RespCheck::kComplete ||
      frame != out.size()));
  return 0;
}
