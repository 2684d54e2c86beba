#pragma once
// Transport (private): hiredis connects the socket (close-on-exec from
// creation, to an address looked up beforehand), bytes are received into the
// connection's RESP parser (src/resp/), which builds the replies in place;
// mbedTLS (tls.cc) optionally wraps the same socket. All I/O is
// non-blocking (MSG_DONTWAIT); callers wait with poll() against their own
// deadline, except transport_read_blocking(), bounded by SO_RCVTIMEO.

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/detail/transport_state.h"
#include "edgelock/endpoint.h"
#include "edgelock/status.h"
#include "edgelock/tls_options.h"

namespace edgelock {
namespace detail {

/// A fixed error text buffer of kErrorTextSize bytes.
using ErrorText = char[kErrorTextSize];

/// How long one transport_read_blocking() may wait (the socket's
/// SO_RCVTIMEO): callers block only with at least this much (plus
/// kBlockingReadMargin for timer slack) left of their deadline.
constexpr Nanos kBlockingReadSlice = Millis(100);
constexpr Nanos kBlockingReadMargin = Millis(10);

/// Looks `ep`'s host up into *out (IPv4 first, at most kMaxHostAddresses).
/// IP literals and unix sockets need no lookup: no allocation, no I/O.
/// A name goes to getaddrinfo(), which may block on DNS with no bound of
/// ours and allocates; *looked_up says whether it was called. On failure
/// *out keeps its addresses and gets lookup_error.
/// Errors: kConnectFailed (the name does not resolve; text in err).
Status transport_resolve(const Endpoint& ep, ResolvedHost* out, bool* looked_up, ErrorText& err);

/// Connects to the first of `addrs` (or ep.path) that accepts, all within
/// `deadline` (never a lookup), then TLS if the scheme says so; sets the
/// receive timeout to kBlockingReadSlice and empties the receive buffer. The
/// socket is close-on-exec from its creation. Allocates (hiredis's context,
/// freed before it returns; the TLS session): this is setup.
/// Errors: kConnectFailed (refused, unreachable, no address), kTimeout,
/// kTls, kTlsUntrusted, kTlsCertTime, kTlsHostMismatch, kTlsUnavailable,
/// kInvalidArgument, kIo, kBufferTooSmall.
Status transport_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                      const TlsOptions& tls, Deadline deadline, Clock& clock, ErrorText& err);

/// The socket part of transport_open(): a non-blocking connect per
/// address in turn until one is accepted or `deadline` passes. Returns the
/// connected fd (close-on-exec, still non-blocking, TCP_NODELAY and
/// keepalive on for TCP) or -1 with *code (kConnectFailed, kTimeout) and
/// the text in err.
int connect_socket(const Endpoint& ep, const ResolvedHost& addrs, Deadline deadline, Clock& clock,
                   ErrorText& err, ErrorCode* code);

/// Closes the socket and frees what transport_open allocated. Idempotent.
void transport_close(TransportState& t);

/// Writes what it can of [data, data+n). Returns bytes written (0 = would
/// block). Errors: kIo, kConnectionClosed, kTls.
Result<size_t> transport_write(TransportState& t, const uint8_t* data, size_t n, ErrorText& err);

/// Reads what is available into the receive buffer. Returns bytes read (0 =
/// would block). Errors: kIo, kConnectionClosed, kTls, kBufferTooSmall (the
/// buffer is full: a reply longer than it, or more replies than it holds
/// since the last command).
Result<size_t> transport_read(TransportState& t, ErrorText& err);

/// Like transport_read() but waits up to kBlockingReadSlice for bytes, so
/// a caller waiting for one reply spends one syscall instead of poll() +
/// recv(). Returns 0 if nothing came in that time (or on a signal). Plain
/// sockets only: with TLS it returns 0 at once (mbedTLS may need to write).
/// Errors: kIo, kConnectionClosed, kBufferTooSmall.
Result<size_t> transport_read_blocking(TransportState& t, ErrorText& err);

/// The next complete reply, or nullptr if more bytes are needed. Valid
/// until t.parser.release() (Connection: the next command) or close.
/// Errors: kProtocol, kBufferTooSmall.
Result<const Reply*> transport_next_reply(TransportState& t, ErrorText& err);

/// Bytes received but not consumed by a reply. Non-zero right after a
/// reply means the server sent more than we asked for.
size_t transport_unread(const TransportState& t);

/// True if the idle connection has input waiting (unread bytes, an
/// unsolicited reply, or the peer's FIN/RST): its next reply would not be
/// ours, so it must not be used. Plain sockets only peek (no read, no
/// allocation); TLS checks only what is already buffered, since a TLS peer
/// may legitimately send records (session tickets) between replies.
bool transport_stale_input(const TransportState& t);

/// True if decrypted TLS bytes are buffered, which poll() would not report.
bool transport_has_pending_input(const TransportState& t);

// TLS layer (tls.cc, or tls_stub.cc when built without mbedTLS).
/// Handshake on t.fd within min(deadline, now + opts.handshake_timeout).
/// Errors: kTimeout (handshake deadline), kTlsUntrusted (unknown CA, pin
/// mismatch), kTlsCertTime (expired / not yet valid), kTlsHostMismatch,
/// kTls (alert, client certificate required, not TLS, closed mid-handshake,
/// bad PEM), kInvalidArgument (no CA, half a client pair), kIo (poll),
/// kTlsUnavailable (stub).
Status tls_open(TransportState& t, const Endpoint& ep, const TlsOptions& opts,
                Deadline deadline, Clock& clock, ErrorText& err);
void tls_close(TransportState& t);
/// As transport_write/read; 0 = would block, with t.want_events set to what
/// mbedTLS waits for. Errors: kConnectionClosed (close_notify, EOF or reset
/// between records), kTls (reset mid-record, alert, record error, a refusal
/// right after a TLS 1.3 handshake: a client certificate was required).
Result<size_t> tls_write(TransportState& t, const uint8_t* data, size_t n, ErrorText& err);
Result<size_t> tls_read(TransportState& t, uint8_t* dst, size_t cap, ErrorText& err);
bool tls_has_pending(const TransportState& t);
/// True when the library was built with TLS support.
bool tls_available();

}  // namespace detail
}  // namespace edgelock
