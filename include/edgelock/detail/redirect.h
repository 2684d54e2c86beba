#pragma once
// Internal: the data of a Redis Cluster MOVED or ASK error reply, decoded
// when the reply is read ("MOVED 3999 10.0.0.2:6381", "ASK 3999 :6381"),
// so a router never parses the (truncated) human error text.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"

namespace edgelock {
namespace resp {

struct Redirect {
  /// The target's host as sent (empty: the node that answered); views the
  /// connection's receive buffer, valid until its next request.
  Bytes host;
  uint16_t slot = 0;
  uint16_t port = 0;
  bool valid = false;  ///< A well-formed MOVED or ASK was read.
};

/// Decodes the error reply `text` (its class word included). valid is false
/// unless it is "<MOVED|ASK> <slot 0..16383> <host>:<port 1..65535>".
Redirect decode_redirect(const char* text, size_t len);

}  // namespace resp
}  // namespace edgelock
