#pragma once
// Parallel fan-out of one script to many connections on one thread
// (private). Every request is encoded and written before any reply is
// awaited; one wait (poll() for sockets) then covers all of them against
// one deadline, so a round costs about one round trip, not one per server.
//
// A request still unanswered when a round ends (decided early, or deadline)
// stays in flight: the next round first reads ("drains") that old reply on
// the same connection, then sends its own. That keeps a healthy but slower
// server's socket (no reconnect, no heap) and keeps a release ordered after
// an acquire that may still land. A drain that outlives a whole round is
// given up (the connection is closed). A release is not made to wait for the
// drain: it is queued behind the request in flight (pipelined), so a frozen
// server runs the acquire and then the release when it resumes; its
// connection stays open and the late replies are drained before the next
// request.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/detail/fanout_slot.h"
#include "edgelock/script.h"
#include "edgelock/script_call.h"
#include "edgelock/status.h"
#include "quorum_math.h"

namespace edgelock {
namespace detail {

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
  int64_t yes_min = 1;
  bool wait_all = false;
};

struct FanoutResult {
  TimePoint decided_at{}; ///< When the last reply that settled it was read.
  bool timed_out = false; ///< The deadline ended the round.
};

/// Runs one round over conns[0..n) (n <= kMaxQuorumServers) until the goal
/// is met or `deadline`. All connections share `clock`.
FanoutResult run_fanout(Connection* const* conns, FanoutSlot* slots, size_t n,
                        const FanoutRequest& req, const FanoutGoal& goal, Deadline deadline,
                        Clock& clock);

/// Counts the outcomes of the wanted slots. `no` counts replies below
/// goal.yes_min.
Tally tally_of(const FanoutSlot* slots, size_t n, const FanoutGoal& goal);

}  // namespace detail
}  // namespace edgelock
