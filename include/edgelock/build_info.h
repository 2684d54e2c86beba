#pragma once
/// @file build_info.h
/// What this copy of the library was built with: its version and the
/// versions of hiredis and mbedTLS it was compiled against (for
/// `edgelock --version` and bug reports). The capacities are in
/// edgelock/config.h.

namespace edgelock {

struct BuildInfo {
  const char* version;  ///< The library's version ("0.1.0").
  const char* hiredis;  ///< hiredis's, from its headers ("1.2.0").
  const char* mbedtls;  ///< mbedTLS's ("3.6.2"), or "" when built without TLS.
  bool tls;             ///< rediss:// is available.
};

/// The build's facts (static storage, never null strings). No I/O, no heap.
const BuildInfo& build_info();

}  // namespace edgelock
