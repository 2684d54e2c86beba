#pragma once
// What the TLS layer was built with and what a session negotiated, for
// diagnostics and the tests that check a build links the library generation
// it was configured for (tls.cc; tls_stub.cc without TLS).

#include "edgelock/detail/transport_state.h"

namespace edgelock {
namespace detail {

struct TlsLibraryVersions {
  const char* compiled = "";  // MBEDTLS_VERSION_STRING of the headers ("" without TLS)
  char linked[18] = {};       // mbedtls_version_get_string() of the linked library
  const char* max_version = "";  // highest protocol offered: "TLSv1.2" or "TLSv1.3"
};

/// Fills *out. No allocation.
void tls_library_versions(TlsLibraryVersions* out);

/// The negotiated protocol ("TLSv1.2", "TLSv1.3") of an open TLS
/// connection, or nullptr for a plain or closed one.
const char* tls_version_name(const TransportState& t);

}  // namespace detail
}  // namespace edgelock
