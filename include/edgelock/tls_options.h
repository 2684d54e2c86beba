#pragma once
/// @file tls_options.h
/// TLS settings for rediss:// endpoints. Verification is on by default.

#include <cstdint>

#include "edgelock/clock.h"

namespace edgelock {

struct TlsOptions {
  /// CA certificate(s) to trust: a PEM file path, or PEM text in memory.
  const char* ca_file = nullptr;
  const char* ca_pem = nullptr;
  /// Client certificate and key for mutual TLS (PEM files), both or neither.
  const char* cert_file = nullptr;
  const char* key_file = nullptr;
  /// Name for SNI and certificate verification; defaults to the URL host.
  const char* server_name = nullptr;
  /// Optional pin: SHA-256 of the server certificate (DER), 32 bytes.
  const uint8_t* pin_sha256 = nullptr;
  /// The handshake's own deadline.
  Nanos handshake_timeout = Millis(5000);
  /// DANGEROUS: accept any certificate and any name. Only for lab setups;
  /// an eavesdropper on the path can then steal and forge locks.
  bool insecure_skip_verify_dangerous = false;
};

}  // namespace edgelock
