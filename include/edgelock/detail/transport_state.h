#pragma once
// Internal: the state of the built-in socket transport. Only plain types
// here, so public headers never include hiredis or mbedTLS; the pointers are
// owned by src/transport/.

namespace edgelock {
namespace detail {

struct TlsSession;  // src/transport/tls.cc

struct TransportState {
  TlsSession* tls = nullptr;
  int fd = -1;            // ours (close-on-exec from creation)
  short want_events = 0;  // extra poll events TLS asked for
};

}  // namespace detail
}  // namespace edgelock
