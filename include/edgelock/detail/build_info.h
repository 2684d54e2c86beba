#pragma once
/// @file detail/build_info.h
/// Internal: not part of the public API.
/// What this copy of the library was built with: its version and the
/// versions of hiredis and mbedTLS (for `edgelock --version` and bug
/// reports). The capacities are in edgelock/config.h.

namespace edgelock {

struct BuildInfo {
  const char* version = "";      ///< The library's version ("0.1.0").
  char hiredis[16] = {};         ///< hiredis's, from its headers ("1.2.0").
  const char* mbedtls = "";      ///< mbedTLS's headers ("3.6.2"); "" without TLS.
  char mbedtls_linked[18] = {};  ///< The linked mbedTLS library's; "" without TLS.
  const char* tls_max = "";      ///< Highest TLS version offered ("TLSv1.3"); "" without TLS.
  bool tls = false;              ///< rediss:// is available.
};

/// The build's facts (strings never null), filled on each call: no static
/// state to guard. No I/O, no heap.
BuildInfo build_info();

}  // namespace edgelock
