// libFuzzer target: the URL parser. Invariants: no crash/UB; on success
// every field is NUL-terminated within its capacity and formats back.
#include <cstdint>

#include <cstring>
#include "fuzz_check.h"

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
    FUZZ_REQUIRE(!(s.code() != ErrorCode::kInvalidArgument &&
                   s.code() != ErrorCode::kBufferTooSmall &&
                   s.code() != ErrorCode::kTlsUnavailable));
    return 0;
  }
  // host and path share storage: check the one the scheme says is in use.
  const bool unix_socket = ep.scheme == Scheme::kUnix;
  FUZZ_REQUIRE(unix_socket ? std::strlen(ep.path) <= kMaxPathLen
                           : std::strlen(ep.host) <= kMaxHostLen);
  FUZZ_REQUIRE(std::strlen(ep.user) <= kMaxUserLen && std::strlen(ep.password) <= kMaxPasswordLen);
  char out[kMaxHostLen + 16];
  std::memset(out, 'Z', sizeof out);
  const int n = format_endpoint(ep, out, static_cast<int>(sizeof out));
  FUZZ_REQUIRE(!(n < 0 || std::memchr(out, '\0', sizeof out) == nullptr));
  return 0;
}
