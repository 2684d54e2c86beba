#pragma once
// Internal: one server's part in a quorum round (src/quorum_fanout.h). Only
// plain types, so QuorumLock can hold these in fixed arrays.

#include <cstdint>

#include "edgelock/status.h"

namespace edgelock {
namespace detail {

enum class SlotOutcome : uint8_t {
  kNone,     ///< Not in this round.
  kReplied,  ///< An integer reply arrived (value), or two (value, aux).
  kFailed,   ///< Not sent, or an error reply: this request changed nothing
             ///< that we can count on (error in `error`).
  kUnknown,  ///< Sent; no usable reply (pending, timed out, I/O error).
};

/// One server's part in a round. The caller sets `want`; the rest is output
/// (`draining` and `in_flight` carry over to the next round).
struct FanoutSlot {
  bool want = false;       ///< Take part in this round.
  bool sent = false;       ///< Our request was handed to the connection.
  bool in_flight = false;  ///< Waiting for a reply (ours or an old one).
  bool draining = false;   ///< The reply in flight answers an older round.
  SlotOutcome outcome = SlotOutcome::kNone;
  ErrorCode error = ErrorCode::kOk;
  int64_t value = 0;
  int64_t aux = 0;  ///< Second integer of a two-integer reply, else 0.
};

}  // namespace detail
}  // namespace edgelock
