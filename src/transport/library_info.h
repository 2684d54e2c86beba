#pragma once
// Which hiredis and mbedTLS this build uses, and what a TLS session
// negotiated: for diagnostics, and for the tests that check a build linked
// the library generation it was configured for. Plain types only.

#include "edgelock/detail/transport_state.h"

namespace edgelock {
namespace detail {

struct LibraryInfo {
  int hiredis_major = 0, hiredis_minor = 0, hiredis_patch = 0;  // its headers
  const char* tls_compiled = "";  // MBEDTLS_VERSION_STRING of the headers ("": no TLS)
  char tls_linked[18] = {};       // mbedtls_version_get_string() of the linked library
  const char* tls_max = "";       // highest protocol offered: "TLSv1.2" or "TLSv1.3"
};

/// Fills *out (socket_connect.cc: hiredis; tls.cc or tls_stub.cc: TLS).
/// No allocation.
void library_info(LibraryInfo* out);
void tls_library_info(LibraryInfo* out);

/// The negotiated protocol ("TLSv1.2", "TLSv1.3") of an open TLS
/// connection, or nullptr for a plain or closed one.
const char* tls_version_name(const TransportState& t);

}  // namespace detail
}  // namespace edgelock
