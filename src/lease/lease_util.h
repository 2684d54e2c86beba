#pragma once
// Small helpers shared by the primitives (private): reading script
// replies. Which errors leave an outcome unknown or are worth a retry is
// the error table's (traits() in status.h).

#include <cstdint>

#include "edgelock/reply.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// Whether a reply element is an integer; its value in *out.
inline bool int_at(const Reply* r, size_t i, int64_t* out) {
  if (!r || r->type != ReplyType::kArray || i >= r->count) return false;
  if (r->elements[i].type != ReplyType::kInteger) return false;
  *out = r->elements[i].integer;
  return true;
}

}  // namespace detail
}  // namespace edgelock
