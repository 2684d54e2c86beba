#pragma once
// Internal: one server's part in a quorum round, and the round itself
// (src/quorum/quorum_fanout.h). Only plain types, so QuorumLock can hold these in
// fixed arrays and keep a round going across its step() calls.

#include <cstddef>
#include <cstdint>

#include "edgelock/clock.h"
#include "edgelock/script.h"
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
  bool want = false;        ///< Take part in this round.
  bool sent = false;        ///< Our request was handed to the connection.
  bool in_flight = false;   ///< Waiting for a reply (ours or an old one).
  bool draining = false;    ///< The reply in flight answers an older round.
  bool connecting = false;  ///< Ours waits for the connect under way.
  SlotOutcome outcome = SlotOutcome::kNone;
  ErrorCode error = ErrorCode::kOk;
  int64_t value = 0;
  int64_t aux = 0;  ///< Second integer of a two-integer reply, else 0.
};

/// The script call; the script and the arrays its spans view must stay
/// valid while any request of the round may still be in flight (the lock
/// keeps them as members). On a connection still owing an older reply it
/// is queued behind that request (Connection::pipeline_eval): the server
/// runs it next even if the older one never answers in time, and a release
/// decided at its majority does not keep the next request from a
/// straggler.
struct FanoutRequest {
  ScriptCall call;
  /// Sent by body (EVAL), never by SHA-1: a request whose loss matters
  /// (a release) must not come back NOSCRIPT with another queued behind
  /// it, when the connection can no longer re-send it in order.
  bool by_body = false;
};

/// When a round may stop: a reply value >= yes_min is a yes; the round
/// stops once every wanted request is out (a straggler still owing an older
/// reply gets ours too) and round_decided(quorum, ...) holds, or, with
/// wait_all, when every wanted server has answered; or at its deadline.
struct FanoutGoal {
  size_t quorum = 1;
  int32_t yes_min = 1;  // 1, 0 (any reply) or -2: 4 bytes keep the round small
  bool wait_all = false;
  /// Decided only once every request is written, not just handed to a
  /// connection still connecting: a release must reach what it can.
  bool written = false;
};

/// One round in progress: what is asked, when it is decided, and until when.
struct FanoutRound {
  FanoutRequest req;
  FanoutGoal goal;
  Deadline deadline = Deadline::never();
};

}  // namespace detail
}  // namespace edgelock
