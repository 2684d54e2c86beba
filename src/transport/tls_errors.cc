// Classifying TLS failures: one specific error code per cause, with the
// mbedTLS reason kept in the connection's fixed error text.
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>

#include "base/error_text.h"
#include "transport/tls_session.h"

namespace edgelock {
namespace detail {

namespace {

constexpr uint32_t kTimeFlags = MBEDTLS_X509_BADCERT_EXPIRED | MBEDTLS_X509_BADCERT_FUTURE |
                                MBEDTLS_X509_BADCRL_EXPIRED | MBEDTLS_X509_BADCRL_FUTURE;

// The first line of mbedtls_x509_crt_verify_info(), without the prefix.
void verify_reason(uint32_t flags, char* out, size_t size) {
  out[0] = '\0';
  const int n = mbedtls_x509_crt_verify_info(out, size, "", flags);
  for (int i = 0; i < n && out[i]; ++i) {
    if (out[i] == '\n') out[i] = '\0';
  }
}

Status certificate_error(const TlsSession& s, ErrorText& err) {
  const uint32_t flags = mbedtls_ssl_get_verify_result(&s.ssl);
  char why[96];
  if (s.pin_failed) {
    set_error(err, "TLS: server certificate does not match the SHA-256 pin");
    return ErrorCode::kTlsUntrusted;
  }
  // Time first: a device whose clock says 1970 sees every certificate as
  // "not yet valid", and that is what the operator must fix.
  if (flags & kTimeFlags) {
    verify_reason(flags & kTimeFlags, why, sizeof why);
    set_error(err, "TLS: certificate expired or not yet valid (check the clock): %s", why);
    return ErrorCode::kTlsCertTime;
  }
  if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH) {
    set_error(err, "TLS: server name does not match the certificate (%s SAN)",
              s.ip_len ? "no matching IP" : "no matching DNS/CN");
    return ErrorCode::kTlsHostMismatch;
  }
  verify_reason(flags, why, sizeof why);
  set_error(err, "TLS: server certificate not trusted: %s", why);
  return ErrorCode::kTlsUntrusted;
}

bool is_refusal(int ret) {
  return ret == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE || ret == MBEDTLS_ERR_SSL_CONN_EOF ||
         ret == MBEDTLS_ERR_NET_CONN_RESET;
}

// TLS 1.2 has no "certificate required" alert: the server asked for a
// certificate (a CertificateRequest went by in clear text), we had none,
// then it aborted with an alert, or just closed or reset the connection.
bool client_cert_refused(const TlsSession& s, int ret) {
  return s.wire.cert_requested && !s.has_client_cert && is_refusal(ret);
}

// TLS 1.3 encrypts the CertificateRequest, and the client finishes its
// handshake before the server checks the (empty) certificate: the refusal
// (alert 116, certificate_required, also encrypted) is what the first read
// after the handshake finds, before any reply. With a certificate of ours,
// only an alert counts (the server refused it, e.g. an unknown CA).
bool refused_after_tls13_handshake(const TlsSession& s, int ret) {
  return tls_session_is_tls13(s) && s.app_bytes == 0 && is_refusal(ret) &&
         (!s.has_client_cert || ret == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE);
}

const char* alert_name(int alert) {
  switch (alert) {
    case MBEDTLS_SSL_ALERT_MSG_PROTOCOL_VERSION: return "protocol version";
    case MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE: return "handshake failure";
    case MBEDTLS_SSL_ALERT_MSG_BAD_CERT: return "bad certificate";
    case MBEDTLS_SSL_ALERT_MSG_UNKNOWN_CA: return "unknown CA";
    case MBEDTLS_SSL_ALERT_MSG_INSUFFICIENT_SECURITY: return "insufficient security";
    case 116: return "certificate required";  // RFC 8446; no macro in 2.28
    default: return "see RFC 8446 6.2";
  }
}

// The alert's description if it came in clear text; encrypted ones (after
// the keys are set) are not exposed by mbedTLS's public API.
Status alert_error(const TlsSession& s, ErrorText& err) {
  if (s.wire.alert < 0) {
    set_error(err, "TLS: fatal alert from server (encrypted)");
  } else {
    set_error(err, "TLS: fatal alert %d from server (%s)", s.wire.alert, alert_name(s.wire.alert));
  }
  return ErrorCode::kTls;
}

}  // namespace

Status tls_handshake_error(TlsSession& s, int ret, ErrorText& err) {
  char cause[64];
  mbedtls_strerror(ret, cause, sizeof cause);
  if (ret == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED || s.pin_failed) return certificate_error(s, err);
  if (client_cert_refused(s, ret)) {
    set_error(err, "TLS: server requires a client certificate: %s", cause);
    return ErrorCode::kTls;
  }
  if (ret == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE) return alert_error(s, err);
  if (ret == MBEDTLS_ERR_SSL_CONN_EOF || ret == MBEDTLS_ERR_NET_CONN_RESET) {
    set_error(err, "TLS: server %s the connection during the handshake",
              ret == MBEDTLS_ERR_SSL_CONN_EOF ? "closed" : "reset");
    return ErrorCode::kTls;
  }
  // The server sent something that is no TLS record: a plaintext Redis (or
  // another protocol) on that port.
  if (s.wire.not_tls) {
    set_error(err, "TLS: server does not speak TLS: %s", cause);
    return ErrorCode::kTls;
  }
  set_error(err, "TLS: handshake failed: %s (-0x%04x)", cause, static_cast<unsigned>(-ret));
  return ErrorCode::kTls;
}

Status tls_record_error(const TlsSession& s, int ret, const char* op, ErrorText& err) {
  if (ret == 0 || ret == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) {
    set_error(err, "TLS: server closed the connection");
    return ErrorCode::kConnectionClosed;
  }
  if (refused_after_tls13_handshake(s, ret)) {
    if (!s.has_client_cert) {
      set_error(err,
                "TLS: server requires a client certificate: it refused the connection "
                "right after the TLS 1.3 handshake");
    } else {
      set_error(err,
                "TLS: fatal alert from server right after the TLS 1.3 handshake "
                "(encrypted; it refused our client certificate?)");
    }
    return ErrorCode::kTls;
  }
  if (ret == MBEDTLS_ERR_SSL_CONN_EOF || ret == MBEDTLS_ERR_NET_CONN_RESET) {
    // A record cut short is a truncation: possibly an attack, never a reply.
    size_t have = 0;
    if (tls_wire_in_record(s.wire, &have)) {
      set_error(err, "TLS: connection reset mid-record (%zu bytes of a record)", have);
      return ErrorCode::kTls;
    }
    set_error(err, "TLS: connection %s", ret == MBEDTLS_ERR_SSL_CONN_EOF ? "closed" : "reset");
    return ErrorCode::kConnectionClosed;
  }
  if (ret == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE) return alert_error(s, err);
  char cause[64];
  mbedtls_strerror(ret, cause, sizeof cause);
  set_error(err, "TLS %s: %s (-0x%04x)", op, cause, static_cast<unsigned>(-ret));
  return ErrorCode::kTls;
}

}  // namespace detail
}  // namespace edgelock
