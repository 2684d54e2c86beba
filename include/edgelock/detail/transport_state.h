#pragma once
// Internal: the state of the built-in socket transport. Only plain types
// here, so public headers never include hiredis or mbedTLS; the pointers are
// owned by src/transport/.

#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/endpoint.h"
#include "edgelock/tls_options.h"

namespace edgelock {
namespace detail {

struct TlsSession;  // src/transport/tls.cc

/// Where an open stands (src/transport/tcp.cc has the transitions).
enum class OpenPhase : uint8_t {
  kClosed,      // no socket
  kConnecting,  // non-blocking connect in progress (waits for writability)
  kTls,         // TLS handshake in progress (waits for what mbedTLS asks)
  kOpen,        // the stream is usable
};

struct TransportState {
  TlsSession* tls = nullptr;
  int fd = -1;            // ours (close-on-exec from creation)
  short want_events = 0;  // poll events the open (or TLS) waits for
  OpenPhase phase = OpenPhase::kClosed;
  uint8_t next_addr = 0;  // the address the next connect attempt goes to
  // The open under way: its deadline (the TLS phase's may be earlier) and
  // what it was started with (the caller's, valid until the open ends).
  Deadline deadline = Deadline::never();
  const Endpoint* ep = nullptr;
  const ResolvedHost* addrs = nullptr;
  const TlsOptions* tls_opts = nullptr;
};

}  // namespace detail
}  // namespace edgelock
