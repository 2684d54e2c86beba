#pragma once
// The mbedTLS state of one rediss:// connection (private to src/transport).
// Allocated once per connect; steady-state reads and writes use only the
// record buffers mbedTLS allocated during setup.
//
// Two mbedTLS generations build from these files: 2.28 (TLS 1.2) and 3.6
// LTS (TLS 1.3 and 1.2). Only public API is used; what differs between them
// is selected with MBEDTLS_VERSION_NUMBER in the tls*.cc files and here.

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/version.h>
#include <mbedtls/x509_crt.h>

#include <cstddef>
#include <cstdint>

#include "transport/transport.h"

#if MBEDTLS_VERSION_NUMBER < 0x021C0000 ||                                           \
    (MBEDTLS_VERSION_NUMBER >= 0x03000000 && MBEDTLS_VERSION_NUMBER < 0x03060000) || \
    MBEDTLS_VERSION_NUMBER >= 0x04000000
#error "edgelock needs mbedTLS 2.28 or 3.6 (LTS branches)"
#endif

/// mbedTLS 3.6 built with TLS 1.3 (Debian 13's is): offered by default.
#if MBEDTLS_VERSION_NUMBER >= 0x03060000 && defined(MBEDTLS_SSL_PROTO_TLS1_3)
#define EDGELOCK_TLS13 1
#else
#define EDGELOCK_TLS13 0
#endif

namespace edgelock {
namespace detail {

/// What the server's bytes say on the wire, observed as they pass the BIO
/// (tls_wire.cc): record framing, and what is still in clear text - TLS 1.2
/// handshake messages and alerts up to the server's ChangeCipherSpec, and
/// alerts sent before any key exists. mbedTLS keeps the same facts in
/// private fields; reading the wire needs none of them.
struct TlsWire {
  uint8_t hdr[5] = {};
  uint8_t hdr_len = 0;     // header bytes of the current record seen
  uint16_t rec_len = 0;    // body length of the current record
  uint16_t body_left = 0;  // body bytes of the current record still to come
  uint8_t hs_hdr[4] = {};  // clear-text handshake message header
  uint8_t hs_hdr_len = 0;
  uint32_t hs_left = 0;         // body bytes of that handshake message to come
  bool ccs_seen = false;        // server's ChangeCipherSpec: the rest is encrypted
  bool not_tls = false;         // a record header no TLS server sends
  bool cert_requested = false;  // clear-text CertificateRequest (TLS 1.2)
  int alert = -1;               // description of a clear-text fatal alert
};

/// Feeds bytes received from the server to the observer. No allocation.
void tls_wire_observe(TlsWire& w, const uint8_t* p, size_t n);

/// True while a record has started but not fully arrived (a cut here is a
/// truncation); *have is how many of its bytes did arrive.
bool tls_wire_in_record(const TlsWire& w, size_t* have);

struct TlsSession {
  // No mbedtls_entropy_context (38 KB in Debian's 2.28 build): the DRBG
  // seeds and reseeds straight from getrandom() (random_bytes()).
  mbedtls_ctr_drbg_context drbg;
  mbedtls_ssl_config conf;
  mbedtls_ssl_context ssl;
  mbedtls_x509_crt ca;
  mbedtls_x509_crt cert;
  mbedtls_pk_context key;
  int fd = -1;
  bool has_client_cert = false;
  // Name checks edgelock does itself: IP literals against iPAddress SANs
  // (no SNI for them, RFC 6066; mbedTLS 2.28 only matches DNS names), and
  // the optional certificate pin.
  uint8_t ip[16] = {};
  size_t ip_len = 0;  // 0: the server name is a DNS name (mbedTLS checks it)
  const uint8_t* pin = nullptr;
  bool pin_failed = false;
  bool ip_failed = false;
  size_t bytes_received = 0;  // raw bytes, to tell "silent" from "not TLS"
  size_t app_bytes = 0;       // decrypted reply bytes returned so far
  TlsWire wire;
};

/// Loads CA, client certificate and key into `s` and configures `s.conf`
/// (TLS 1.2 minimum; 1.3 preferred where the library has it).
/// Errors: kInvalidArgument (no CA without the insecure option, half a
/// client pair), kTls (unreadable or malformed PEM; mbedTLS cause in err).
Status tls_configure(TlsSession& s, const TlsOptions& opts, ErrorText& err);

/// Parses `name` as an IPv4/IPv6 literal into s.ip (ip_len 0 if it is not).
void tls_set_ip_name(TlsSession& s, const char* name);

/// Maps a failed mbedtls_ssl_handshake() result to an error code and text.
Status tls_handshake_error(TlsSession& s, int ret, ErrorText& err);

/// Maps a failed mbedtls_ssl_read/write() result (not WANT_*) likewise.
Status tls_record_error(const TlsSession& s, int ret, const char* op, ErrorText& err);

/// True if the session negotiated TLS 1.3 (always false with 2.28).
bool tls_session_is_tls13(const TlsSession& s);

}  // namespace detail
}  // namespace edgelock
