// TLS over the hiredis-connected socket: mbedTLS 2.28 (TLS 1.2) or 3.6
// (TLS 1.3, 1.2 allowed) with non-blocking BIO callbacks; the handshake
// runs in steps (one mbedtls_ssl_handshake_step() each, never waiting)
// that the connection takes when the socket is ready for what mbedTLS
// asked.
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <new>

#include "base/error_text.h"
#include "edgelock/detail/random.h"
#include "transport/library_info.h"
#include "transport/tls_session.h"
#include "transport/transport.h"

#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#include <psa/crypto.h>
#endif

namespace edgelock {
namespace detail {

namespace {

constexpr char kPersonalization[] = "edgelock-tls";

int bio_send(void* ctx, const unsigned char* buf, size_t len) {
  TlsSession* s = static_cast<TlsSession*>(ctx);
  for (;;) {
    const ssize_t n = send(s->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_WRITE;
    if (errno == EPIPE || errno == ECONNRESET) return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_SEND_FAILED;
  }
}

int bio_recv(void* ctx, unsigned char* buf, size_t len) {
  TlsSession* s = static_cast<TlsSession*>(ctx);
  for (;;) {
    const ssize_t n = recv(s->fd, buf, len, MSG_DONTWAIT);
    if (n >= 0) {
      s->bytes_received += static_cast<size_t>(n);
      tls_wire_observe(s->wire, buf, static_cast<size_t>(n));
      return static_cast<int>(n);  // 0 = EOF: mbedTLS reports CONN_EOF
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return MBEDTLS_ERR_SSL_WANT_READ;
    if (errno == ECONNRESET) return MBEDTLS_ERR_NET_CONN_RESET;
    return MBEDTLS_ERR_NET_RECV_FAILED;
  }
}

// CTR_DRBG's entropy source: the kernel's getrandom().
int os_entropy(void*, unsigned char* out, size_t len) {
  return random_bytes(out, len).ok() ? 0 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

void session_free(TlsSession* s) {
  mbedtls_ssl_free(&s->ssl);
  mbedtls_ssl_config_free(&s->conf);
  mbedtls_x509_crt_free(&s->ca);
  mbedtls_x509_crt_free(&s->cert);
  mbedtls_pk_free(&s->key);
  mbedtls_ctr_drbg_free(&s->drbg);
  s->~TlsSession();
  std::free(s);
}

TlsSession* session_new() {
  // malloc, not new(std::nothrow): that operator links the C++ runtime's
  // throw and terminate path (and its demangler) into a static program.
  void* mem = std::malloc(sizeof(TlsSession));
  if (!mem) return nullptr;
  TlsSession* s = new (mem) TlsSession;
  mbedtls_ctr_drbg_init(&s->drbg);
  mbedtls_ssl_config_init(&s->conf);
  mbedtls_ssl_init(&s->ssl);
  mbedtls_x509_crt_init(&s->ca);
  mbedtls_x509_crt_init(&s->cert);
  mbedtls_pk_init(&s->key);
  return s;
}

Status fail_mbedtls(int ret, const char* what, ErrorText& err) {
  char cause[64];
  mbedtls_strerror(ret, cause, sizeof cause);
  set_error(err, "TLS: %s: %s (-0x%04x)", what, cause, static_cast<unsigned>(-ret));
  return ErrorCode::kTls;
}

// mbedTLS 3.x computes TLS 1.3 (and, built with MBEDTLS_USE_PSA_CRYPTO,
// TLS 1.2) through the PSA crypto API, which needs psa_crypto_init() once
// per process. Later calls return at once; the first one allocates PSA's
// key store and seeds its own DRBG, kept until exit (shared by all
// connections). Thread-safe in 3.6 built with MBEDTLS_THREADING_C.
Status crypto_ready(ErrorText& err) {
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
  const psa_status_t st = psa_crypto_init();
  if (st != PSA_SUCCESS) {
    set_error(err, "TLS: PSA crypto initialisation failed (%d)", static_cast<int>(st));
    return ErrorCode::kTls;
  }
#else
  (void)err;
#endif
  return Status();
}

// Seeds the DRBG from the OS, loads keys, binds the session to the socket.
Status session_setup(TlsSession& s, const Endpoint& ep, const TlsOptions& opts, int fd,
                     ErrorText& err) {
  s.fd = fd;
  EDGELOCK_TRY(crypto_ready(err));
  int ret = mbedtls_ctr_drbg_seed(&s.drbg, os_entropy, nullptr,
                                  reinterpret_cast<const unsigned char*>(kPersonalization),
                                  sizeof kPersonalization - 1);
  if (ret != 0) return fail_mbedtls(ret, "seeding the random generator", err);
  EDGELOCK_TRY(tls_configure(s, opts, err));
  ret = mbedtls_ssl_setup(&s.ssl, &s.conf);
  if (ret != 0) return fail_mbedtls(ret, "session setup", err);
  const char* name = opts.server_name && opts.server_name[0] ? opts.server_name : ep.host;
  tls_set_ip_name(s, name);
  // A name is sent as SNI and matched by mbedTLS. An IP literal gets no SNI
  // (RFC 6066; mbedTLS would send it) and is matched against iPAddress SANs
  // by our verify callback: NULL tells mbedTLS so explicitly (3.6 refuses
  // to verify when no name was set at all).
  ret = mbedtls_ssl_set_hostname(&s.ssl, s.ip_len == 0 ? name : nullptr);
  if (ret != 0) return fail_mbedtls(ret, "server name", err);
  mbedtls_ssl_set_bio(&s.ssl, &s, bio_send, bio_recv, nullptr);
  return Status();
}

bool handshake_over(mbedtls_ssl_context& ssl) {
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
  return mbedtls_ssl_is_handshake_over(&ssl) != 0;
#else
  return ssl.state == MBEDTLS_SSL_HANDSHAKE_OVER;
#endif
}

}  // namespace

Status tls_start(TransportState& t, const Endpoint& ep, const TlsOptions& opts, Clock& clock,
                 ErrorText& err) {
  tls_close(t);
  if (opts.handshake_timeout <= Nanos::zero()) {
    set_error(err, "TLS: handshake_timeout must be positive");
    return ErrorCode::kInvalidArgument;
  }
  TlsSession* s = session_new();
  if (!s) {
    set_error(err, "TLS: out of memory");
    return ErrorCode::kTls;
  }
  t.tls = s;
  const Status st = session_setup(*s, ep, opts, t.fd, err);
  if (!st.ok()) {
    tls_close(t);
    return st;
  }
  t.deadline = t.deadline.min(Deadline::after(clock, opts.handshake_timeout));
  return Status();
}

Result<bool> tls_step(TransportState& t, Clock& clock, ErrorText& err) {
  TlsSession& s = *t.tls;
  // One handshake message per call: a flight's crypto (certificate checks,
  // key exchange) is spread over several short calls, not one long one.
  const int ret = handshake_over(s.ssl) ? 0 : mbedtls_ssl_handshake_step(&s.ssl);
  if (ret == 0 && handshake_over(s.ssl)) {
    // Insecure mode with a pin verifies OPTIONAL-ly: the pin still decides.
    if (s.pin_failed) return tls_handshake_error(s, ret, err);
    t.want_events = 0;
    return true;
  }
  if (ret == 0) {
    t.want_events = POLLOUT;  // more to do at once: a writable socket wakes the caller now
  } else if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) {
    t.want_events = ret == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT;
  } else {
    return tls_handshake_error(s, ret, err);
  }
  if (!t.deadline.expired(clock)) return false;
  set_error(err, s.bytes_received == 0 ? "TLS: handshake timed out, server sent nothing (not TLS?)"
                                       : "TLS: handshake timed out");
  return ErrorCode::kTimeout;
}

void tls_close(TransportState& t) {
  if (!t.tls) return;
  // Best effort close_notify; a non-blocking socket may drop it, which is fine.
  mbedtls_ssl_close_notify(&t.tls->ssl);
  session_free(t.tls);
  t.tls = nullptr;
  t.want_events = 0;
}

namespace {

// What mbedtls_ssl_write() or a positive mbedtls_ssl_read() returned:
// bytes moved, 0 while it waits for the fd event it names, else the error.
Result<size_t> io_result(TransportState& t, int ret, const char* what, ErrorText& err) {
  if (ret >= 0) {
    t.want_events = 0;
    return static_cast<size_t>(ret);
  }
  if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE) {
    t.want_events = ret == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT;
    return static_cast<size_t>(0);
  }
  return tls_record_error(*t.tls, ret, what, err);
}

}  // namespace

Result<size_t> tls_write(TransportState& t, const uint8_t* data, size_t n, ErrorText& err) {
  // On WANT_*, mbedTLS expects the same data again: Connection resends from
  // the same offset, so that holds.
  return io_result(t, mbedtls_ssl_write(&t.tls->ssl, data, n), "write", err);
}

Result<size_t> tls_read(TransportState& t, uint8_t* dst, size_t cap, ErrorText& err) {
  const int ret = mbedtls_ssl_read(&t.tls->ssl, dst, cap);
  if (ret > 0) t.tls->app_bytes += static_cast<size_t>(ret);
  // 0 is the peer's end of the stream, an error here (not "nothing yet").
  if (ret == 0) return tls_record_error(*t.tls, ret, "read", err);
  return io_result(t, ret, "read", err);
}

bool tls_has_pending(const TransportState& t) {
  return t.tls && mbedtls_ssl_get_bytes_avail(&t.tls->ssl) > 0;
}

bool tls_available() { return true; }

bool tls_session_is_tls13(const TlsSession& s) {
#if EDGELOCK_TLS13
  return mbedtls_ssl_get_version_number(&s.ssl) == MBEDTLS_SSL_VERSION_TLS1_3;
#else
  (void)s;
  return false;
#endif
}

const char* tls_version_name(const TransportState& t) {
  return t.tls ? mbedtls_ssl_get_version(&t.tls->ssl) : nullptr;
}

void tls_library_info(LibraryInfo* out) {
  out->tls_compiled = MBEDTLS_VERSION_STRING;
  mbedtls_version_get_string(out->tls_linked);
  out->tls_max = EDGELOCK_TLS13 ? "TLSv1.3" : "TLSv1.2";
}

}  // namespace detail
}  // namespace edgelock
