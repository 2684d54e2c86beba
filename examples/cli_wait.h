#pragma once
// edgelock: waiting for a grant within the tool's bounds.
//
// A lock (or permit) held by someone else is waited for as long as --wait
// says: for ever by default, like flock. A server that does not answer
// (timeouts, refused or failed connects, LOADING/BUSY, grants that arrive
// too late to use) ends the wait once it has given no usable answer for
// --server-wait ms (exit 3). To look between tries, the library's
// acquire(wait) is called in slices: one slice is at most the server-wait
// budget left (1 s when the library's events cannot be watched, as for a
// quorum lock). Each call ends by its slice + one command budget, so
// acquire/run give up within --server-wait + 2 command budgets of the
// server's last answer (the second budget is the clean-up release).

#include "cli.h"

namespace cli {

// The server gave a usable answer: granted, or held by someone else.
bool answered(edgelock::ErrorCode code);
// No usable answer yet, worth another try within the bounds.
bool transient(edgelock::ErrorCode code);

// When the server last gave a usable answer: from the connection's event
// hook (every attempt, single server) or from each slice's result.
class ServerWatch {
 public:
  // `conn` may be null (quorum: the library reports no per-server events).
  ServerWatch(const Options& o, edgelock::Clock& clock, edgelock::Connection* conn);
  ~ServerWatch();
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;

  // How long the next library acquire may wait (>= 0).
  edgelock::Nanos next_slice() const;
  // After a failed slice: true to try again, false to give up with `s`
  // (wait over, no answer within --server-wait, or a definitive error).
  bool go_on(edgelock::Status s);

 private:
  static void on_event(const edgelock::Event& e, void* self);
  void saw(edgelock::Status s);

  const Options& o_;
  edgelock::Clock& clock_;
  edgelock::Connection* conn_;
  edgelock::Deadline wait_end_;
  edgelock::TimePoint answered_at_;
  bool told_ = false;  // "not answering" printed for this silence
};

// Acquires with attempt(slice) -> Status until it succeeds, a definitive
// error, the end of --wait, or --server-wait without an answer. After every
// failure but kBusy, clean_up() hands back what the attempt may have taken
// (a grant whose reply was lost) while its token is still known: the next
// slice draws a new one. Returns the last attempt's status.
template <typename AttemptFn, typename CleanUpFn>
edgelock::Status bounded_acquire(const Options& o, edgelock::Clock& clock, edgelock::Connection* conn,
                                 AttemptFn attempt, CleanUpFn clean_up) {
  ServerWatch watch(o, clock, conn);
  edgelock::Status s;
  // Every slice takes at least one round trip or sleep; the count is a
  // second guard on top of the time bounds.
  for (uint32_t i = 0; i < 10000000; ++i) {
    s = attempt(watch.next_slice());
    if (s.ok()) break;
    if (s.code() != edgelock::ErrorCode::kBusy) clean_up();
    if (!watch.go_on(s)) break;
  }
  return s;
}

}  // namespace cli
