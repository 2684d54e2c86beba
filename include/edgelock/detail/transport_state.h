#pragma once
// Internal: the state a Connection keeps for its transport. Only plain
// types here, so public headers never include hiredis or mbedTLS; the
// pointers are owned by src/transport/.

#include "edgelock/detail/resp_parser.h"

namespace edgelock {
namespace detail {

struct TlsSession;  // src/transport/tls.cc

struct TransportState {
  TlsSession* tls = nullptr;
  int fd = -1;             // ours (close-on-exec from creation)
  short want_events = 0;   // extra poll events TLS asked for
  resp::Parser parser;     // the receive buffer and the replies read from it
};

}  // namespace detail
}  // namespace edgelock
