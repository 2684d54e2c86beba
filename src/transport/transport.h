#pragma once
// Transport (private): the pieces of the built-in SocketTransport
// (include/edgelock/detail/socket_transport.h). hiredis connects the socket
// (close-on-exec from creation, to an address looked up beforehand;
// socket_connect.cc), plain I/O is non-blocking send()/recv() on it (tcp.cc),
// and mbedTLS (tls.cc) optionally wraps the same socket. Callers wait with
// poll() against their own deadline, except a read allowed to wait, bounded
// by SO_RCVTIMEO (kTransportWaitSlice).

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/detail/transport_state.h"
#include "edgelock/endpoint.h"
#include "edgelock/status.h"
#include "edgelock/tls_options.h"
#include "edgelock/transport.h"

namespace edgelock {
namespace detail {

/// A fixed error text buffer of kErrorTextSize bytes.
using ErrorText = edgelock::ErrorText;

/// Looks `ep`'s host up into *out (IPv4 first, at most kMaxHostAddresses).
/// IP literals and unix sockets need no lookup: no allocation, no I/O.
/// A name goes to getaddrinfo(), which may block on DNS with no bound of
/// ours and allocates; *looked_up says whether it was called. On failure
/// *out keeps its addresses and gets lookup_error.
/// Errors: kConnectFailed (the name does not resolve; text in err).
Status transport_resolve(const Endpoint& ep, ResolvedHost* out, bool* looked_up, ErrorText& err);

/// Connects to the first of `addrs` (or ep.path) that accepts, all within
/// `deadline` (never a lookup), then TLS if the scheme says so; sets the
/// receive timeout to kTransportWaitSlice. The socket is close-on-exec from
/// its creation. Allocates (hiredis's context, freed before it returns; the
/// TLS session): this is setup.
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

// TLS layer (tls.cc, or tls_stub.cc when built without mbedTLS).
/// Handshake on t.fd within min(deadline, now + opts.handshake_timeout).
/// Errors: kTimeout (handshake deadline), kTlsUntrusted (unknown CA, pin
/// mismatch), kTlsCertTime (expired / not yet valid), kTlsHostMismatch,
/// kTls (alert, client certificate required, not TLS, closed mid-handshake,
/// bad PEM), kInvalidArgument (no CA, half a client pair), kIo (poll),
/// kTlsUnavailable (stub).
Status tls_open(TransportState& t, const Endpoint& ep, const TlsOptions& opts, Deadline deadline,
                Clock& clock, ErrorText& err);
void tls_close(TransportState& t);
/// As Transport::write_some/read_some; 0 = would block, with t.want_events
/// set to what mbedTLS waits for. Errors: kConnectionClosed (close_notify,
/// EOF or reset between records), kTls (reset mid-record, alert, record
/// error, a refusal right after a TLS 1.3 handshake: a client certificate
/// was required).
Result<size_t> tls_write(TransportState& t, const uint8_t* data, size_t n, ErrorText& err);
Result<size_t> tls_read(TransportState& t, uint8_t* dst, size_t cap, ErrorText& err);
bool tls_has_pending(const TransportState& t);
/// True when the library was built with TLS support.
bool tls_available();

}  // namespace detail
}  // namespace edgelock
