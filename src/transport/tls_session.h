#pragma once
// The mbedTLS state of one rediss:// connection (private to src/transport).
// Allocated once per connect; steady-state reads and writes use only the
// record buffers mbedTLS allocated during setup.

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"

namespace edgelock {
namespace detail {

struct TlsSession {
  // No mbedtls_entropy_context (38 KB in Debian's build): the DRBG seeds
  // and reseeds straight from getrandom() (random_bytes()).
  mbedtls_ctr_drbg_context drbg;
  mbedtls_ssl_config conf;
  mbedtls_ssl_context ssl;
  mbedtls_x509_crt ca;
  mbedtls_x509_crt cert;
  mbedtls_pk_context key;
  int fd = -1;
  bool has_client_cert = false;
  // Name checks mbedTLS 2.28 cannot do itself: IP literals against iPAddress
  // SANs (it only matches dNSName), and the optional certificate pin.
  uint8_t ip[16] = {};
  size_t ip_len = 0;  // 0: the server name is a DNS name (mbedTLS checks it)
  const uint8_t* pin = nullptr;
  bool pin_failed = false;
  bool ip_failed = false;
  size_t bytes_received = 0;  // raw bytes, to tell "silent" from "not TLS"
};

/// Loads CA, client certificate and key into `s` and configures `s.conf`.
/// Errors: kInvalidArgument (no CA without the insecure option, half a
/// client pair), kTls (unreadable or malformed PEM; mbedTLS cause in err).
Status tls_configure(TlsSession& s, const TlsOptions& opts, ErrorText& err);

/// Parses `name` as an IPv4/IPv6 literal into s.ip (ip_len 0 if it is not).
void tls_set_ip_name(TlsSession& s, const char* name);

/// Maps a failed mbedtls_ssl_handshake() result to an error code and text.
Status tls_handshake_error(TlsSession& s, int ret, ErrorText& err);

/// Maps a failed mbedtls_ssl_read/write() result (not WANT_*) likewise.
Status tls_record_error(const TlsSession& s, int ret, const char* op, ErrorText& err);

}  // namespace detail
}  // namespace edgelock
