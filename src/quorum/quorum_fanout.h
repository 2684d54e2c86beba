#pragma once
// Parallel fan-out of one script to many connections on one thread
// (private). Every request is encoded and written before any reply is
// awaited; one wait (poll() for sockets) then covers all of them against
// one deadline, so a round costs about one round trip, not one per server.
//
// A request still unanswered when a round ends (decided early, or deadline)
// stays in flight. The next round first reads the old replies already
// received ("drains"), then queues its request behind what is still owed
// on the same connection (pipelined, up to ConnectionIo::kMaxPipelined
// replies due): a frozen server runs both in order when it resumes, and a
// straggler of a round decided at its majority still gets the next
// request. That keeps a healthy but slower server's socket (no reconnect,
// no heap) and every request in the order sent. When the pipeline is full
// the old replies are drained first, and a drain that outlives a whole
// round is given up (the connection is closed).

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/detail/fanout_slot.h"
#include "edgelock/script.h"
#include "edgelock/status.h"
#include "quorum/quorum_math.h"

namespace edgelock {
namespace detail {

struct FanoutResult {
  TimePoint decided_at{};  ///< When the last reply that settled it was read.
  bool timed_out = false;  ///< The deadline ended the round.
};

// A round in steps, for a caller that owns the loop (QuorumLock's
// start/step machine). conns[0..n) (n <= kMaxQuorumServers) share `clock`;
// `round` and the slots live in the caller across the calls.

/// Starts the round: drops dead idle connections, queues or drains behind
/// old requests, and writes every request it can (connected servers first;
/// a connect or reconnect is started, its steps taken by fanout_step()).
void start_fanout(Connection* const* conns, FanoutSlot* slots, size_t n, const FanoutRound& round,
                  Clock& clock);
/// Moves the slots in flight without blocking: those with ready[i] != 0,
/// or with `ready` null every one (a recv() that finds nothing is cheap).
void fanout_step(Connection* const* conns, FanoutSlot* slots, size_t n, const FanoutRound& round,
                 const short* ready);
/// True once the round is decided (the goal) or its deadline has passed.
bool fanout_over(const FanoutSlot* slots, size_t n, const FanoutRound& round, Clock& clock);
/// Ends the round: marks what is still in flight (see leave() in the .cc).
FanoutResult fanout_end(Connection* const* conns, FanoutSlot* slots, size_t n,
                        const FanoutRound& round, Clock& clock);
/// The descriptors of the slots in flight (fd and events) into out[0, cap);
/// *buffered is set if one has bytes waiting where poll() cannot see them
/// (TLS): then step without waiting.
size_t fanout_wait_fds(Connection* const* conns, const FanoutSlot* slots, size_t n, pollfd* out,
                       size_t cap, bool* buffered);
/// The earliest deadline of a connect phase among the slots in flight
/// (never() if none is connecting): wake then to let it fail.
Deadline fanout_step_deadline(Connection* const* conns, const FanoutSlot* slots, size_t n);
/// Blocks until a slot in flight is ready or the round's deadline (or a
/// connect phase's) passes;
/// ready[0..n) tells which. False if the wait itself failed (the round
/// should end).
bool fanout_await(Connection* const* conns, const FanoutSlot* slots, size_t n,
                  const FanoutRound& round, Clock& clock, short* ready);

/// Counts the outcomes of the wanted slots. `no` counts replies below
/// goal.yes_min.
Tally tally_of(const FanoutSlot* slots, size_t n, const FanoutGoal& goal);

}  // namespace detail
}  // namespace edgelock
