#include "edgelock/detail/random.h"

#include <sys/random.h>

#include <cerrno>

namespace edgelock {

Status random_bytes(uint8_t* out, size_t n) {
  size_t got = 0;
  for (int tries = 0; got < n && tries < 64; ++tries) {
    const ssize_t r = getrandom(out + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && errno != EINTR) {
      return ErrorCode::kRandomFailed;
    }
  }
  return got == n ? Status() : Status(ErrorCode::kRandomFailed);
}

Status random_hex(char* hex, size_t n) {
  uint8_t raw[64];
  if (n > sizeof raw) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(random_bytes(raw, n));
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    hex[2 * i] = kDigits[raw[i] >> 4];
    hex[2 * i + 1] = kDigits[raw[i] & 0xF];
  }
  return Status();
}

Status Prng::seed_from_os() {
  uint64_t seed = 0;
  EDGELOCK_TRY(random_bytes(reinterpret_cast<uint8_t*>(&seed), sizeof seed));
  state_ = seed ? seed : 1;
  return Status();
}

uint64_t Prng::next() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1Dull;
}

int64_t Prng::uniform(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(next() % span);
}

}  // namespace edgelock
