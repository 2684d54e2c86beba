#pragma once
// edgelock: every place the tool touches a library handle's names. The
// subcommands call these, never the handles' renewal, error-text or reset
// members directly, so a change of those names is made here.

#include "cli.h"

namespace cli {

// Owner-checked renewal to the handle's full TTL.
template <typename L>
edgelock::Status renew(L& lock) {
  return lock.renew();
}

// The handle's last error text (never null).
template <typename L>
const char* error_text(const L& lock) {
  return lock.last_error();
}

// Ends a rate limiter's window now (deletes its server key).
template <typename Gate>
edgelock::Status end_period(Gate& gate) {
  return gate.erase_on_server();
}

// run: with the lease (Lock, QuorumLock, a semaphore permit) acquired,
// runs COMMAND, keeps the lease, releases it. Returns the exit code
// (run.cc).
int run_child(const Options& o, edgelock::Lease& lease);

}  // namespace cli
