#pragma once
// Transport (private): the pieces of the built-in SocketTransport
// (include/edgelock/detail/socket_transport.h). hiredis starts a
// non-blocking connect (close-on-exec from creation, to an address looked
// up beforehand; socket_connect.cc), plain I/O is non-blocking
// send()/recv() on it (tcp.cc), and mbedTLS (tls.cc) optionally wraps the
// same socket. The open is a sequence of steps (connect, TLS handshake),
// none of which waits. Callers wait with poll() against their own
// deadline, except a read allowed to wait, bounded by SO_RCVTIMEO
// (kTransportWaitSlice).

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/detail/transport.h"
#include "edgelock/detail/transport_state.h"
#include "edgelock/endpoint.h"
#include "edgelock/status.h"
#include "edgelock/tls_options.h"

namespace edgelock {
namespace detail {

/// A fixed error text buffer of kErrorTextSize bytes.
using ErrorText = edgelock::ErrorText;

/// Fills *out when `ep` needs no lookup: a unix socket or an empty host
/// (no address), an IPv4 or IPv6 literal, a scoped one included. No I/O
/// (a scoped literal allocates, in getaddrinfo with AI_NUMERICHOST).
/// False for a host name: *out is unchanged.
bool transport_resolve_numeric(const Endpoint& ep, ResolvedHost* out);

/// Looks `ep`'s host up into *out (IPv4 first, at most kMaxHostAddresses).
/// IP literals and unix sockets need no lookup (transport_resolve_numeric()).
/// A name goes to getaddrinfo(), which may block on DNS with no bound of
/// ours and allocates; *looked_up says whether it was called. On failure
/// *out keeps its addresses and gets lookup_error.
/// Errors: kConnectFailed (the name does not resolve; text in err).
Status transport_resolve(const Endpoint& ep, ResolvedHost* out, bool* looked_up, ErrorText& err);

/// Starts opening `ep` (its host at `addrs`, never a lookup) without
/// blocking: a non-blocking connect to the first address that does not
/// fail at once; transport_open_step() takes it on from there. `ep`,
/// `addrs` and `tls` must stay valid until the open ends; `deadline`
/// bounds all of it. Allocates (hiredis's context, freed before it
/// returns; later the TLS session): this is set-up.
/// Errors: kConnectFailed (every address refused at once, no address).
Status transport_start_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                            const TlsOptions& tls, Deadline deadline, ErrorText& err);
/// Moves the open as far as it goes without waiting: the connect's result
/// (a failed address: the next one), then the TLS handshake. Ok while the
/// open goes on (t.phase before kOpen, t.want_events what it waits for)
/// and once open; a failure closes the socket. Once connected the socket
/// is put back in blocking mode with the receive timeout
/// kTransportWaitSlice (every other call passes MSG_DONTWAIT).
/// Errors: kConnectFailed, kTimeout, kTls, kTlsUntrusted, kTlsCertTime,
/// kTlsHostMismatch, kTlsUnavailable, kInvalidArgument, kIo.
Status transport_open_step(TransportState& t, Clock& clock, ErrorText& err);
/// transport_start_open(), then steps and poll() until the open ends or
/// `deadline` passes (the blocking open; tests and tools).
/// Errors: as transport_open_step().
Status transport_open(TransportState& t, const Endpoint& ep, const ResolvedHost& addrs,
                      const TlsOptions& tls, Deadline deadline, Clock& clock, ErrorText& err);

/// The socket part: starts a non-blocking connect to t.addrs from
/// t.next_addr on (or t.ep->path), skipping addresses that fail at once;
/// t.fd is close-on-exec, TCP_NODELAY and keepalive on for TCP.
/// Errors: kConnectFailed (none left; the last reason in err).
Status socket_start_connect(TransportState& t, ErrorText& err);
/// Looks (poll() with no wait) whether the connect is done: true when
/// connected, false while pending; a failed address moves on to the next
/// one. Errors: kTimeout (t.deadline passed), kConnectFailed (no address
/// left), kIo.
Result<bool> socket_connect_step(TransportState& t, Clock& clock, ErrorText& err);

/// Closes the socket and frees what transport_open allocated. Idempotent.
void transport_close(TransportState& t);

// TLS layer (tls.cc, or tls_stub.cc when built without mbedTLS).
/// Starts TLS on the connected t.fd: allocates and sets up the session
/// (CA, client pair, server name) and narrows t.deadline to
/// opts.handshake_timeout from now. Errors: kInvalidArgument (no CA, half
/// a client pair, handshake_timeout not positive), kTls (bad PEM, out of
/// memory), kTlsUnavailable (stub).
Status tls_start(TransportState& t, const Endpoint& ep, const TlsOptions& opts, Clock& clock,
                 ErrorText& err);
/// One handshake step, never waiting: true once done; false while mbedTLS
/// waits for t.want_events. Errors: kTimeout (t.deadline passed),
/// kTlsUntrusted (unknown CA, pin mismatch), kTlsCertTime (expired / not
/// yet valid), kTlsHostMismatch, kTls (alert, client certificate
/// required, not TLS, closed mid-handshake), kTlsUnavailable (stub).
Result<bool> tls_step(TransportState& t, Clock& clock, ErrorText& err);
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
