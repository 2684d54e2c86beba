#pragma once
// Internal: the state a Connection keeps for its transport. Only plain
// types here, so public headers never include hiredis or mbedTLS; the
// pointers are owned by src/transport/.

#include "edgelock/reply.h"

namespace edgelock {
namespace detail {

struct TlsSession;  // src/transport/tls.cc

struct TransportState {
  void* reader = nullptr;  // redisReader* with arena reply functions
  TlsSession* tls = nullptr;
  int fd = -1;             // ours (close-on-exec from creation)
  short want_events = 0;   // extra poll events TLS asked for
  ReplyArena arena;
};

}  // namespace detail
}  // namespace edgelock
