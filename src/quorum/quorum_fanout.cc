// One round of parallel requests over many connections, one wait per turn.
#include "quorum/quorum_fanout.h"

#include "edgelock/detail/connection_io.h"
#include "edgelock/limits.h"

namespace edgelock {
namespace detail {

namespace {

struct Round {
  Connection* const* conns;
  FanoutSlot* slots;
  size_t n;
  const FanoutRequest& req;
  const FanoutGoal& goal;
  Deadline deadline;
};

size_t capped(size_t n) { return n <= kMaxQuorumServers ? n : kMaxQuorumServers; }

Round round_of(Connection* const* conns, FanoutSlot* slots, size_t n, const FanoutRound& fr) {
  return Round{conns, slots, capped(n), fr.req, fr.goal, fr.deadline};
}

void finish(FanoutSlot& s, const Result<const Reply*>& r) {
  s.in_flight = false;
  if (!r.ok()) {
    s.error = r.status().code();
    // An error reply: the server saw the request and refused it. A lost
    // connection after sending says nothing about what the server did.
    s.outcome = traits(s.error).server_rejected ? SlotOutcome::kFailed : SlotOutcome::kUnknown;
    return;
  }
  const Reply& v = *r.value();
  // An integer, or {integer, integer} (value, aux): a quorum acquire's busy
  // reply carries the holder's PTTL and the server's fence counter.
  const bool pair = v.type == ReplyType::kArray && v.count == 2 &&
                    v.elements[0].type == ReplyType::kInteger &&
                    v.elements[1].type == ReplyType::kInteger;
  if (v.type != ReplyType::kInteger && !pair) {
    s.error = ErrorCode::kProtocol;
    s.outcome = SlotOutcome::kUnknown;
    return;
  }
  s.value = pair ? v.elements[0].integer : v.integer;
  s.aux = pair ? v.elements[1].integer : 0;
  s.outcome = SlotOutcome::kReplied;
}

void start(Round& r, size_t i);
bool queue_behind(Round& r, size_t i);

// Moves slot i along without blocking. Replies come oldest first; while the
// connection is still busy after one, it answered an earlier request.
void step(Round& r, size_t i) {
  FanoutSlot& s = r.slots[i];
  ConnectionIo io = detail::io(*r.conns[i]);
  for (int k = 0; k <= ConnectionIo::kMaxPipelined; ++k) {
    // A connect that fails (or a first write that fails right after it)
    // leaves the request unwritten: the server never saw it.
    const bool unwritten = io.connecting();
    const Result<const Reply*> res = io.advance_pipeline();
    if (res.ok() && !res.value()) {
      // The old request may be out only now (its connect just finished):
      // ours can be queued behind it from here on.
      if (s.draining && !s.sent) queue_behind(r, i);
      s.connecting = io.connecting();
      return;
    }
    if (io.busy()) continue;  // an older round's reply: more to come
    const bool ours = s.sent;
    s.draining = false;
    s.in_flight = false;
    s.connecting = false;
    if (ours) {
      finish(s, res);
      if (unwritten && !res.ok()) s.outcome = SlotOutcome::kFailed;
    } else {
      start(r, i);  // the old replies (or their failure) are in: send ours
    }
    return;
  }
}

void start(Round& r, size_t i) {
  FanoutSlot& s = r.slots[i];
  // By body until this stream has seen the script run: the next round may
  // queue its request behind this one (see ConnectionIo::script_loaded()).
  ConnectionIo io = detail::io(*r.conns[i]);
  const bool by_body = r.req.by_body || !io.script_loaded(r.req.call.script);
  const Status st = by_body ? io.start_eval_by_body(r.req.call, r.deadline)
                            : io.start_eval(r.req.call, r.deadline);
  if (!st.ok()) {
    s.error = st.code();
    s.outcome = SlotOutcome::kFailed;
    return;
  }
  s.sent = true;
  s.in_flight = true;
  step(r, i);  // write now, before the next server is even encoded
}

// An idle connection has nothing to read; if it is readable the server
// closed it (restart, kill). Reconnect before sending rather than send into
// a dead socket and be left not knowing whether the request landed.
void drop_dead_idle(Round& r, Clock& clock) {
  TransportWait items[kMaxQuorumServers];
  size_t index[kMaxQuorumServers];
  size_t k = 0;
  for (size_t i = 0; i < r.n; ++i) {
    ConnectionIo io = detail::io(*r.conns[i]);
    if (!r.slots[i].want || io.busy() || !r.conns[i]->is_connected()) continue;
    items[k] = TransportWait{&io.transport(), kWantRead, 0};
    index[k++] = i;
  }
  ErrorText err;
  if (k == 0) return;
  const Result<size_t> ready =
      items[0].transport->wait(items, k, Deadline::at(clock.now()), clock, err);
  if (!ready.ok() || ready.value() == 0) return;
  for (size_t j = 0; j < k; ++j) {
    if (items[j].ready != 0) r.conns[index[j]]->close();
  }
}

// Queues this round's request behind the one still in flight, so the
// server runs both in order even if it never answers within the round.
// False if it cannot (then the old reply is drained first).
bool queue_behind(Round& r, size_t i) {
  ConnectionIo io = detail::io(*r.conns[i]);
  // The last place is kept for a release: whatever was queued on a slow
  // server, its release can follow it there.
  if (!r.req.by_body && io.replies_due() + 1 >= ConnectionIo::kMaxPipelined) return false;
  const Status st = io.pipeline_eval(r.req.call);
  if (!st.ok()) return false;
  r.slots[i].sent = true;
  step(r, i);  // write now
  return true;
}

void begin(Round& r, Clock& clock) {
  drop_dead_idle(r, clock);
  for (size_t i = 0; i < r.n; ++i) {
    FanoutSlot& s = r.slots[i];
    s.sent = false;
    s.error = ErrorCode::kOk;
    s.value = 0;
    s.aux = 0;
    s.outcome = SlotOutcome::kNone;
    s.in_flight = detail::io(*r.conns[i]).busy();
    s.connecting = s.in_flight && detail::io(*r.conns[i]).connecting();
    s.draining = s.in_flight;
    if (!s.want || !s.draining) continue;
    // Old replies already here are read first (a round decided at its
    // majority leaves a straggler's behind, and nothing reads them between
    // rounds); once all are in, step() sends ours. Otherwise ours is queued
    // behind the old request, or, if it cannot be (written only in part, or
    // the pipeline full), goes out once they are drained: the round is not
    // decided before it has.
    step(r, i);
    if (s.draining && !s.sent) queue_behind(r, i);
  }
  // Connected servers first: their requests are written before any
  // (re)connect starts.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < r.n; ++i) {
      FanoutSlot& s = r.slots[i];
      if (!s.want || s.draining || s.sent || r.conns[i]->is_connected() != (pass == 0)) continue;
      start(r, i);
    }
  }
}

bool settled(const FanoutSlot* slots, size_t n, const FanoutGoal& goal) {
  size_t yes = 0;
  size_t waiting = 0;
  size_t unsent = 0;  // still reading an older reply before sending ours
  for (size_t i = 0; i < n; ++i) {
    const FanoutSlot& s = slots[i];
    if (!s.want) continue;
    if (s.in_flight) ++waiting;
    if (s.in_flight && (!s.sent || (goal.written && s.connecting))) ++unsent;
    if (s.outcome == SlotOutcome::kReplied && s.value >= goal.yes_min) ++yes;
  }
  if (waiting == 0) return true;
  return !goal.wait_all && unsent == 0 && round_decided(goal.quorum, yes, waiting);
}

// Marks what is still in flight when the round ends. An old reply still
// owed after a whole round is given up unless our request was queued behind
// it; our own request stays in flight (its reply is drained next round).
void leave(Round& r, bool deadline_passed) {
  for (size_t i = 0; i < r.n; ++i) {
    FanoutSlot& s = r.slots[i];
    if (!s.want || !s.in_flight) continue;
    s.error = ErrorCode::kTimeout;
    // A request still waiting for its connect when the deadline passed is
    // given up with the connect: never written. Left behind by an early
    // decision it is written once connected, as unknown as an unanswered
    // one (the clean-up covers it).
    if (deadline_passed && detail::io(*r.conns[i]).connecting()) s.sent = false;
    if (s.sent) {
      s.outcome = SlotOutcome::kUnknown;
      continue;
    }
    s.outcome = SlotOutcome::kFailed;
    if (deadline_passed) {
      detail::io(*r.conns[i]).abandon().ignore();
      s.in_flight = false;
      s.draining = false;
    }
  }
}

}  // namespace

void start_fanout(Connection* const* conns, FanoutSlot* slots, size_t n, const FanoutRound& round,
                  Clock& clock) {
  Round r = round_of(conns, slots, n, round);
  begin(r, clock);
}

void fanout_step(Connection* const* conns, FanoutSlot* slots, size_t n, const FanoutRound& round,
                 const short* ready) {
  Round r = round_of(conns, slots, n, round);
  for (size_t i = 0; i < r.n; ++i) {
    if (slots[i].want && slots[i].in_flight && (!ready || ready[i] != 0)) step(r, i);
  }
}

bool fanout_over(const FanoutSlot* slots, size_t n, const FanoutRound& round, Clock& clock) {
  return settled(slots, capped(n), round.goal) || round.deadline.expired(clock);
}

FanoutResult fanout_end(Connection* const* conns, FanoutSlot* slots, size_t n,
                        const FanoutRound& round, Clock& clock) {
  Round r = round_of(conns, slots, n, round);
  FanoutResult out;
  out.decided_at = clock.now();
  out.timed_out = !settled(slots, r.n, round.goal);
  leave(r, out.timed_out);
  return out;
}

size_t fanout_wait_fds(Connection* const* conns, const FanoutSlot* slots, size_t n, pollfd* out,
                       size_t cap, bool* buffered) {
  size_t k = 0;
  *buffered = false;
  for (size_t i = 0; i < capped(n); ++i) {
    if (!slots[i].want || !slots[i].in_flight) continue;
    const ConnectionIo io = detail::io(*conns[i]);
    *buffered = *buffered || io.has_pending_input();
    if (k < cap && io.fd() >= 0) out[k++] = pollfd{io.fd(), io.wait_events(), 0};
  }
  return k;
}

Deadline fanout_step_deadline(Connection* const* conns, const FanoutSlot* slots, size_t n) {
  Deadline d = Deadline::never();
  for (size_t i = 0; i < capped(n); ++i) {
    if (slots[i].want && slots[i].in_flight) d = d.min(detail::io(*conns[i]).step_deadline());
  }
  return d;
}

bool fanout_await(Connection* const* conns, const FanoutSlot* slots, size_t n,
                  const FanoutRound& round, Clock& clock, short* ready) {
  TransportWait items[kMaxQuorumServers];
  size_t index[kMaxQuorumServers];
  size_t k = 0;
  bool buffered = false;
  for (size_t i = 0; i < capped(n); ++i) {
    ready[i] = 0;
    if (!slots[i].want || !slots[i].in_flight) continue;
    const ConnectionIo io = detail::io(*conns[i]);
    buffered = buffered || io.has_pending_input();
    items[k] = TransportWait{&io.transport(), io.wait_events(), 0};
    index[k++] = i;
  }
  if (k == 0) return true;
  ErrorText err;
  if (!buffered) {
    const Deadline d = round.deadline.min(fanout_step_deadline(conns, slots, n));
    const Result<size_t> woke = items[0].transport->wait(items, k, d, clock, err);
    if (!woke.ok()) return false;
  }
  for (size_t j = 0; j < k; ++j) ready[index[j]] = buffered ? kWantRead : items[j].ready;
  return true;
}

Tally tally_of(const FanoutSlot* slots, size_t n, const FanoutGoal& goal) {
  Tally t;
  t.n = n;
  for (size_t i = 0; i < n; ++i) {
    const FanoutSlot& s = slots[i];
    if (!s.want) continue;
    switch (s.outcome) {
      case SlotOutcome::kReplied: ++(s.value >= goal.yes_min ? t.yes : t.no); break;
      case SlotOutcome::kUnknown: ++t.unknown; break;
      default: ++t.failed; break;
    }
  }
  return t;
}

}  // namespace detail
}  // namespace edgelock
