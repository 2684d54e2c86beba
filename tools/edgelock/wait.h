#pragma once
// edgelock: waiting for a grant within the tool's bounds.
//
// A lock (or permit) held by someone else is waited for as long as --wait
// says: for ever by default, like flock. A server that does not answer
// (timeouts, refused or failed connects, LOADING/BUSY, grants that arrive
// too late to use) ends the wait once it has given no usable answer for
// --server-wait ms (exit 3). To look between tries, the library's
// acquire(wait) is called in slices: one slice is at most the server-wait
// budget left (1 s when the library's events cannot be watched: a quorum
// lock, Sentinel, Cluster). Each call ends by its slice + one command
// budget, so acquire/run give up within --server-wait + 2 command budgets
// of the server's last answer (the second budget is the clean-up release).

#include "cli.h"

namespace cli {

// The server gave a usable answer: granted, or held by someone else.
bool answered(edgelock::ErrorCode code);
// No usable answer yet, worth another try within the bounds. kNoQuorum is
// one for a quorum lock (too few servers answered), not for replicas that
// did not confirm a grant (--wait-replicas): that would fail the same.
bool transient(edgelock::ErrorCode code, bool quorum);

// The end of a bounded wait.
struct WaitResult {
  edgelock::Status status;  // the last attempt's
  bool silent = false;      // gave up: no usable answer for --server-wait
  long long silent_ms = 0;  // how long the server had been silent then
};

// When the server last gave a usable answer: from the connection's event
// hook (every attempt, single server) or from each slice's result.
class ServerWatch {
 public:
  // `conn` may be null (the library reports no per-server events);
  // `quorum`: waiting for a QuorumLock.
  ServerWatch(const Options& o, edgelock::Clock& clock, edgelock::Connection* conn, bool quorum);
  ~ServerWatch();
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;

  // How long the next library acquire may wait (>= 0).
  edgelock::Nanos next_slice() const;
  // After a failed slice: true to try again, false to give up (wait over,
  // no answer within --server-wait, or a definitive error).
  bool go_on(edgelock::Status s, WaitResult* out);

 private:
  static void on_event(const edgelock::Event& e, void* self);
  void saw(edgelock::Status s);

  const Options& o_;
  edgelock::Clock& clock_;
  edgelock::Connection* conn_;
  bool quorum_;
  edgelock::Deadline wait_end_;
  edgelock::TimePoint answered_at_;
  bool told_ = false;  // "not answering" printed for this silence
};

// Acquires with attempt(slice) -> Status until it succeeds, a definitive
// error, the end of --wait, or --server-wait without an answer. After every
// failure but kBusy, clean_up() hands back what the attempt may have taken
// (a grant whose reply was lost) while its token is still known: the next
// slice draws a new one.
template <typename AttemptFn, typename CleanUpFn>
WaitResult bounded_acquire(const Options& o, edgelock::Clock& clock, edgelock::Connection* conn,
                           bool quorum, AttemptFn attempt, CleanUpFn clean_up) {
  ServerWatch watch(o, clock, conn, quorum);
  WaitResult r;
  // Every slice takes at least one round trip or sleep; the count is a
  // second guard on top of the time bounds.
  for (uint32_t i = 0; i < 10000000; ++i) {
    r.status = attempt(watch.next_slice());
    if (r.status.ok()) break;
    if (r.status.code() != edgelock::ErrorCode::kBusy) clean_up();
    if (!watch.go_on(r.status, &r)) break;
  }
  return r;
}

// The failure line for a wait that gave up on a silent server (exit 3).
int report_silent(const Options& o, const WaitResult& r);

}  // namespace cli
