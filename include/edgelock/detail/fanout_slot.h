#pragma once
// Internal: one server's part in a quorum round, and the round itself
// (src/quorum_fanout.h). Only plain types, so QuorumLock can hold these in
// fixed arrays and keep a round going across its step() calls.

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/script_call.h"
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

/// The script call; the script and the arrays its spans view must stay
/// valid while any request of the round may still be in flight (the lock
/// keeps them as members).
struct FanoutRequest {
  ScriptCall call;
  /// Queue the request behind one still in flight on the same connection
  /// (Connection::pipeline_eval) instead of first draining its reply: the
  /// server runs it after that request even if it never answers in time.
  /// For releases, which must reach a server that may still run an acquire.
  bool pipeline = false;
};

/// When a round may stop: a reply value >= yes_min is a yes; the round
/// stops once round_decided(quorum, ...) holds, or, with wait_all, only
/// when every wanted server has answered or the deadline passed.
struct FanoutGoal {
  size_t quorum = 1;
  int32_t yes_min = 1;  // 1 or -2: 4 bytes keep the round small
  bool wait_all = false;
};

/// One round in progress: what is asked, when it is decided, and until when.
struct FanoutRound {
  FanoutRequest req;
  FanoutGoal goal;
  Deadline deadline = Deadline::never();
};

}  // namespace detail
}  // namespace edgelock
