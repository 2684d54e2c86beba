// TLS configuration and certificate checks: trust anchors, client keys,
// and the checks edgelock adds to mbedTLS's: IP literals against iPAddress
// SANs (without SNI) and the certificate pin.
#include <arpa/inet.h>
#include <mbedtls/asn1.h>
#include <mbedtls/error.h>
#include <mbedtls/sha256.h>

#include <cstring>

#include "base/error_text.h"
#include "transport/tls_session.h"

namespace edgelock {
namespace detail {

namespace {

// A certificate with more SAN entries than this matches no IP (a bound on
// the walk; real certificates carry a handful).
constexpr int kMaxSanEntries = 1024;

Status fail_load(int ret, const char* what, ErrorText& err) {
  char cause[72];
  mbedtls_strerror(ret, cause, sizeof cause);
  set_error(err, "TLS: cannot load %s: %s", what, cause);
  return ErrorCode::kTls;
}

constexpr unsigned char kIpAddressTag = MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7;  // GeneralName

// Is there an iPAddress subjectAltName equal to ip? mbedTLS keeps the raw
// GeneralName entries in the public subject_alt_names list (2.28 and 3.x).
bool san_has_ip(const mbedtls_x509_crt& crt, const uint8_t* ip, size_t ip_len) {
  int entries = 0;
  for (const mbedtls_x509_sequence* cur = &crt.subject_alt_names; cur; cur = cur->next) {
    if (++entries > kMaxSanEntries) return false;
    if (cur->buf.tag == kIpAddressTag && cur->buf.len == ip_len && cur->buf.p &&
        std::memcmp(cur->buf.p, ip, ip_len) == 0) {
      return true;
    }
  }
  return false;
}

// SHA-256 of the certificate's DER (the pin). 3.x renamed the _ret variant.
bool sha256_of(const mbedtls_x509_crt& crt, uint8_t digest[32]) {
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
  return mbedtls_sha256(crt.raw.p, crt.raw.len, digest, 0) == 0;
#else
  return mbedtls_sha256_ret(crt.raw.p, crt.raw.len, digest, 0) == 0;
#endif
}

// Called by mbedTLS for each certificate of the chain; depth 0 is the server's.
int verify_cb(void* ctx, mbedtls_x509_crt* crt, int depth, uint32_t* flags) {
  TlsSession* s = static_cast<TlsSession*>(ctx);
  if (depth != 0) return 0;
  if (s->ip_len != 0 && !san_has_ip(*crt, s->ip, s->ip_len)) {
    s->ip_failed = true;
    *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
  }
  if (s->pin) {
    uint8_t digest[32];
    if (!sha256_of(*crt, digest) || std::memcmp(digest, s->pin, sizeof digest) != 0) {
      s->pin_failed = true;
      *flags |= MBEDTLS_X509_BADCERT_OTHER;
    }
  }
  return 0;
}

#if EDGELOCK_TLS13
// Signature algorithms offered, PKCS#1 v1.5 before RSA-PSS: mbedTLS 3.6.6
// offers PSS (TLS 1.3 needs it) but rejects a TLS 1.2 ServerKeyExchange
// signed with it, which an OpenSSL server with an RSA key and TLS 1.2 only
// picks when PSS comes first (Mbed-TLS PR 10674, after 3.6.6). TLS 1.3
// does not use PKCS#1 for handshake signatures, so it still gets PSS. What
// the library lacks is left out of the ClientHello by mbedTLS.
constexpr uint16_t kSigAlgs[] = {
    MBEDTLS_TLS1_3_SIG_ECDSA_SECP256R1_SHA256, MBEDTLS_TLS1_3_SIG_ECDSA_SECP384R1_SHA384,
    MBEDTLS_TLS1_3_SIG_ECDSA_SECP521R1_SHA512, MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA256,
    MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA384,       MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA512,
    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA256,    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA384,
    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA512,    MBEDTLS_TLS1_3_SIG_NONE};
#endif

Status load_trust(TlsSession& s, const TlsOptions& o, ErrorText& err) {
  if (o.ca_file) {
    const int ret = mbedtls_x509_crt_parse_file(&s.ca, o.ca_file);
    if (ret != 0) return fail_load(ret, "CA file", err);
  }
  if (o.ca_pem) {  // PEM parsing needs the terminating NUL in the length
    const auto* pem = reinterpret_cast<const unsigned char*>(o.ca_pem);
    const int ret = mbedtls_x509_crt_parse(&s.ca, pem, std::strlen(o.ca_pem) + 1);
    if (ret != 0) return fail_load(ret, "CA PEM", err);
  }
  if (!o.ca_file && !o.ca_pem && !o.insecure_skip_verify_dangerous) {
    set_error(err, "TLS: no CA configured (tls.ca_file or tls.ca_pem)");
    return ErrorCode::kInvalidArgument;
  }
  return Status();
}

Status load_client_pair(TlsSession& s, const TlsOptions& o, ErrorText& err) {
  if (!o.cert_file && !o.key_file) return Status();
  if (!o.cert_file || !o.key_file) {
    set_error(err, "TLS: client certificate and key go together");
    return ErrorCode::kInvalidArgument;
  }
  int ret = mbedtls_x509_crt_parse_file(&s.cert, o.cert_file);
  if (ret != 0) return fail_load(ret, "client certificate", err);
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
  // 3.x blinds private-key operations while checking the pair: needs the RNG.
  ret = mbedtls_pk_parse_keyfile(&s.key, o.key_file, nullptr, mbedtls_ctr_drbg_random, &s.drbg);
#else
  ret = mbedtls_pk_parse_keyfile(&s.key, o.key_file, nullptr);
#endif
  if (ret != 0) return fail_load(ret, "client key", err);
  ret = mbedtls_ssl_conf_own_cert(&s.conf, &s.cert, &s.key);
  if (ret != 0) return fail_load(ret, "client certificate/key pair", err);
  s.has_client_cert = true;
  return Status();
}

}  // namespace

Status tls_configure(TlsSession& s, const TlsOptions& o, ErrorText& err) {
  const int ret = mbedtls_ssl_config_defaults(
      &s.conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
  if (ret != 0) return fail_load(ret, "TLS defaults", err);
  mbedtls_ssl_conf_rng(&s.conf, mbedtls_ctr_drbg_random, &s.drbg);
  // TLS 1.2 minimum; the maximum is the library's (1.3 in 3.6, offered
  // first, with 1.2 still accepted from servers that lack 1.3).
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
  mbedtls_ssl_conf_min_tls_version(&s.conf, MBEDTLS_SSL_VERSION_TLS1_2);
#if EDGELOCK_TLS13
  mbedtls_ssl_conf_sig_algs(&s.conf, kSigAlgs);
#endif
#else
  mbedtls_ssl_conf_min_version(&s.conf, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
#endif
#if defined(MBEDTLS_SSL_RENEGOTIATION)
  // Renegotiation would allocate mid-session; refuse it.
  mbedtls_ssl_conf_renegotiation(&s.conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
#endif
  EDGELOCK_TRY(load_trust(s, o, err));
  EDGELOCK_TRY(load_client_pair(s, o, err));
  s.pin = o.pin_sha256;
  mbedtls_ssl_conf_ca_chain(&s.conf, &s.ca, nullptr);
  mbedtls_ssl_conf_verify(&s.conf, verify_cb, &s);
  // Insecure: verify nothing, except the pin if one was given (checked
  // after the handshake via pin_failed).
  int mode = MBEDTLS_SSL_VERIFY_REQUIRED;
  if (o.insecure_skip_verify_dangerous) {
    mode = o.pin_sha256 ? MBEDTLS_SSL_VERIFY_OPTIONAL : MBEDTLS_SSL_VERIFY_NONE;
  }
  mbedtls_ssl_conf_authmode(&s.conf, mode);
  return Status();
}

void tls_set_ip_name(TlsSession& s, const char* name) {
  s.ip_len = 0;
  if (inet_pton(AF_INET, name, s.ip) == 1) {
    s.ip_len = 4;
  } else if (inet_pton(AF_INET6, name, s.ip) == 1) {
    s.ip_len = 16;
  }
}

}  // namespace detail
}  // namespace edgelock
