// Prints the fixed RAM of the public types: what one connection or one lock
// costs, buffers included (they live inside the objects: the command
// buffer, and the receive buffer with the reply nodes in resp::Parser). A
// plaintext connect keeps no heap; TLS's session is reported in
// docs/memory.md.
#include <cstdint>
#include <cstdio>

#include "edgelock/detail/resp_parser.h"
#include "edgelock/edgelock.h"
#include "footprint_types.h"

// The per-handle budget on 32-bit targets (armhf) with the default
// capacities: a key is stored once per handle, its companion keys are
// written from it as a request is encoded.
#if UINTPTR_MAX == 0xFFFFFFFFu
static_assert(edgelock::kMaxKeyLen != 256 || sizeof(edgelock::Lock) <= 700, "Lock over 700 B");
static_assert(edgelock::kMaxKeyLen != 256 || edgelock::kMaxQuorumServers != 7 ||
                  sizeof(edgelock::QuorumLock) <= 1000,
              "QuorumLock over 1000 B");
#endif

#define EDGELOCK_SIZE(T) std::printf("%-24s %6zu\n", #T, sizeof(T));

int main() {
  std::printf("%-24s %6s\n", "type", "bytes");
  EDGELOCK_FOOTPRINT_TYPES(EDGELOCK_SIZE)
  return 0;
}
