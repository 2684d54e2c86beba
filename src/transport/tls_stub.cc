// Built when TLS is disabled: every rediss:// endpoint fails cleanly.
#include <cstdio>

#include "base/error_text.h"
#include "transport/library_info.h"
#include "transport/transport.h"

namespace edgelock {
namespace detail {

Status tls_start(TransportState&, const Endpoint&, const TlsOptions&, Clock&, ErrorText& err) {
  set_error(err, "rediss:// needs TLS, and this build has none (-Dtls=enabled)");
  return ErrorCode::kTlsUnavailable;
}
Result<bool> tls_step(TransportState&, Clock&, ErrorText&) { return ErrorCode::kTlsUnavailable; }
void tls_close(TransportState&) {}
Result<size_t> tls_write(TransportState&, const uint8_t*, size_t, ErrorText&) {
  return ErrorCode::kTlsUnavailable;
}
Result<size_t> tls_read(TransportState&, uint8_t*, size_t, ErrorText&) {
  return ErrorCode::kTlsUnavailable;
}
bool tls_has_pending(const TransportState&) { return false; }
bool tls_available() { return false; }
void tls_library_info(LibraryInfo*) {}
const char* tls_version_name(const TransportState&) { return nullptr; }

}  // namespace detail
}  // namespace edgelock
