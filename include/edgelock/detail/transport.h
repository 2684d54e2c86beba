#pragma once
/// @file transport.h
/// Internal: a seam for tests and simulation, not part of the stable API.
/// The byte stream under a Connection. The connection encodes commands and
/// parses replies itself; a transport only opens a stream, moves bytes
/// both ways without blocking, and waits for readiness against a deadline.
///
/// The built-in transport (TCP, unix socket, TLS; src/transport/) lives
/// inside every Connection; its open runs in steps (start_open(),
/// open_step()), so a connect never blocks the caller's loop. Another one
/// is plugged in per connection with ConnectionOptions::transport, e.g. a
/// scripted fake for unit tests or a simulated network: no heap, no
/// exceptions, and the rest of the library (locks, quorum fan-out) runs
/// over it unchanged. A transport whose open() may wait should override
/// the open steps too; the default start_open() runs open() at once.

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/endpoint.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"
#include "edgelock/tls_options.h"

namespace edgelock {

/// A connection's fixed error text: a transport writes why it failed here.
using ErrorText = char[kErrorTextSize];

/// Readiness bits, as poll() spells them (POLLIN, POLLOUT).
constexpr short kWantRead = 0x001;
constexpr short kWantWrite = 0x004;

/// How long one read_some(..., may_wait = true) may wait for bytes: a
/// connection lets it wait only with at least this much, plus
/// kTransportWaitMargin, left of its deadline.
constexpr Nanos kTransportWaitSlice = Millis(100);
constexpr Nanos kTransportWaitMargin = Millis(10);

class Transport;

/// One stream in a wait(): `events` in, `ready` out (0: not ready).
struct TransportWait {
  Transport* transport = nullptr;
  short events = 0;
  short ready = 0;
};

class Transport {
 public:
  /// Opens the stream to `ep` (its host at `addrs`, found beforehand: never
  /// a name lookup here) within `deadline`, with TLS when ep.scheme says
  /// so. An open stream is closed first. May allocate: this is set-up.
  /// Errors: kConnectFailed, kTimeout, kTls, kTlsUntrusted, kTlsCertTime,
  /// kTlsHostMismatch, kTlsUnavailable, kInvalidArgument, kIo.
  virtual Status open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                      Deadline deadline, Clock& clock, ErrorText& err) = 0;
  /// Starts what open() does without waiting: ok once the stream is open,
  /// or while the open goes on (opening() true): the caller then waits for
  /// extra_events() on fd() (no later than open_deadline()) and calls
  /// open_step(). `ep`, `addrs` and `tls` must stay valid until the open
  /// ends. The default runs open() (a transport whose open never waits).
  /// Errors: as open().
  virtual Status start_open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                            Deadline deadline, Clock& clock, ErrorText& err) {
    return open(ep, addrs, tls, deadline, clock, err);
  }
  /// Moves an open under way as far as it goes without waiting. Ok while
  /// it goes on and once it is done; a failure (the deadline passed
  /// included) closes the stream. Errors: as open().
  virtual Status open_step(Clock& clock, ErrorText& err) {
    (void)clock;
    (void)err;
    return Status();
  }
  /// True while an open started by start_open() goes on.
  virtual bool opening() const { return false; }
  /// When the open under way gives up (never() when none).
  virtual Deadline open_deadline() const { return Deadline::never(); }
  /// Closes the stream and frees what open() allocated. Idempotent.
  virtual void close() = 0;
  virtual bool is_open() const = 0;

  /// Writes what it can of data[0, n) now. Returns the bytes written (0:
  /// would block; after 0 the caller offers the same bytes again).
  /// Errors: kIo, kConnectionClosed, kTls.
  virtual Result<size_t> write_some(const uint8_t* data, size_t n, ErrorText& err) = 0;
  /// Reads what is there into dst[0, cap) (cap > 0). Returns the bytes read
  /// (0: nothing yet). With `may_wait`, it may first wait up to
  /// kTransportWaitSlice for bytes (a socket waits in recv() itself, which
  /// saves the poll() call of a plain wait). Errors: kIo,
  /// kConnectionClosed (the peer closed or reset it), kTls.
  virtual Result<size_t> read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) = 0;

  /// Waits until one of items[0, n) is ready for its events or `deadline`
  /// passes (then every `ready` is 0); an expired deadline only looks. Every
  /// item's transport must be of this transport's kind (callers ask the
  /// first one to wait for all); n <= kMaxQuorumServers. Returns how many
  /// are ready: 0 only once the deadline passed (a signal does not end it).
  /// Errors: kIo (the wait itself failed).
  virtual Result<size_t> wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                              ErrorText& err) = 0;

  /// Events this stream needs besides the caller's (TLS may have to write
  /// while the caller reads, and the reverse); while opening(), the events
  /// the open waits for.
  virtual short extra_events() const { return 0; }
  /// True if bytes wait inside the transport where wait() cannot see them
  /// (decrypted TLS records): read before waiting.
  virtual bool has_pending_input() const { return false; }
  /// True if an idle stream has input waiting or was closed by the peer:
  /// its next reply would not answer our next request.
  virtual bool has_stale_input() const = 0;
  /// The socket, for callers that watch it (-1 if none).
  virtual int fd() const { return -1; }

 protected:
  Transport() = default;
  Transport(const Transport&) = default;
  Transport& operator=(const Transport&) = default;
  // Not deleted through this interface: the owner holds the concrete type.
  ~Transport() = default;
};

}  // namespace edgelock
