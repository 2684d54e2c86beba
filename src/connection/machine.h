#pragma once
// The library's one blocking driver (private; src/connection/machine.cc).
// Every blocking call is a machine driven by run_machine(): a Connection's
// command() and eval(), each lease's calls (LeaseCore::run()), the
// quorum's, and the back ends' own (detail::call_routed()).

#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// What a blocking call drives: `step` moves the operation (kInProgress
/// while it goes on), `await` blocks until it may move (a reply, a
/// deadline, a pause) and takes in what is ready, `cancel` gives it up.
struct Machine {
  void* self;
  Status (*step)(void* self);
  void (*await)(void* self);
  void (*cancel)(void* self);
};

/// The operation started with `s`, awaited and stepped until it ends. A
/// machine still going after 2^20 turns (a misbehaving peer) is cancelled
/// and ends with kTimeout.
Status run_machine(Status s, const Machine& m);

}  // namespace detail
}  // namespace edgelock
