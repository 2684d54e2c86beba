// libFuzzer target: the URL parser. Invariants: no crash/UB; on success
// every field is NUL-terminated within its capacity and formats back.
#include <cstdint>
#include <cstring>

#include "edgelock/endpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace edgelock;
  char url[1024];
  if (size >= sizeof url) return 0;
  std::memcpy(url, data, size);
  url[size] = '\0';
  Endpoint ep;
  const char* why = nullptr;
  const Status s = parse_url(url, &ep, &why);
  if (!s.ok()) {
    if (s.code() != ErrorCode::kInvalidArgument && s.code() != ErrorCode::kBufferTooSmall &&
        s.code() != ErrorCode::kTlsUnavailable) {
      __builtin_trap();
    }
    return 0;
  }
  if (std::strlen(ep.host) > kMaxHostLen || std::strlen(ep.path) > kMaxPathLen ||
      std::strlen(ep.user) > kMaxUserLen || std::strlen(ep.password) > kMaxPasswordLen) {
    __builtin_trap();
  }
  char out[kMaxHostLen + 16];
  std::memset(out, 'Z', sizeof out);
  const int n = format_endpoint(ep, out, static_cast<int>(sizeof out));
  if (n < 0 || std::memchr(out, '\0', sizeof out) == nullptr) __builtin_trap();
  return 0;
}
