#pragma once
// edgelock: every place the tool touches a library handle's names. The
// subcommands call these, never the handles' renewal, error-text, reset
// or metrics members directly, so a change of those names is made here.
//
// Where the library offers two spellings of one thing (a renewal verb, the
// last error's text), the helpers take whichever the handle has.

#include <type_traits>
#include <utility>

#include "cli.h"

namespace cli {
namespace handles {

struct Rank0 {};
struct Rank1 : Rank0 {};

template <typename L>
auto renew_impl(L& l, Rank1) -> decltype(l.renew()) {
  return l.renew();
}
template <typename L>
auto renew_impl(L& l, Rank0) -> decltype(l.reacquire()) {
  return l.reacquire();
}

template <typename L>
auto error_impl(const L& l, Rank1) -> decltype(static_cast<const char*>(l.last_error())) {
  return l.last_error();
}
template <typename L>
auto error_impl(const L& l, Rank0) -> decltype(static_cast<const char*>(l.connection_error())) {
  return l.connection_error();
}

template <typename L>
auto metrics_impl(const L& l, Rank1) -> decltype(&l.metrics()) {
  return &l.metrics();
}
template <typename L>
const edgelock::Metrics* metrics_impl(const L&, Rank0) {
  return nullptr;
}

}  // namespace handles

// Owner-checked renewal to the handle's full TTL.
template <typename L>
edgelock::Status renew(L& lock) {
  return handles::renew_impl(lock, handles::Rank1());
}

// The handle's last error text (never null).
template <typename L>
const char* error_text(const L& lock) {
  return handles::error_impl(lock, handles::Rank1());
}

// The handle's own counters, or null if it keeps none.
template <typename L>
const edgelock::Metrics* metrics_of(const L& lock) {
  return handles::metrics_impl(lock, handles::Rank1());
}

// True when the primitive runs on any back end (Sentinel, Cluster), not
// only on a plain connection.
template <typename Handle>
constexpr bool kRunsOnBackend = std::is_constructible<Handle, edgelock::Backend&>::value;

// Ends a cooldown period or quota window now (deletes its server key).
template <typename Gate>
edgelock::Status end_period(Gate& gate) {
  return gate.reset();
}

// A held lease as `run` needs it, for any lease type (Lock, QuorumLock, a
// semaphore permit).
struct Lease {
  edgelock::LeaseTarget target;  // renewal and validity, for the keeper
  edgelock::Clock* clock = nullptr;
  edgelock::Bytes token;
  uint64_t fence = 0;
  edgelock::Status (*release)(void* lock) = nullptr;
  const char* (*error_text)(const void* lock) = nullptr;
};

template <typename LockT>
Lease lease_of(LockT& lock, edgelock::Clock& clock) {
  Lease l;
  l.target = edgelock::lease_target(lock);
  l.clock = &clock;
  l.token = lock.token();
  l.fence = lock.fence();
  l.release = [](void* p) -> edgelock::Status { return static_cast<LockT*>(p)->release(); };
  l.error_text = [](const void* p) -> const char* { return cli::error_text(*static_cast<const LockT*>(p)); };
  return l;
}

// The semaphore permit as a lease: renewed by the keeper, released after
// COMMAND.
template <typename PermitLeaseT>
Lease permit_lease_of(PermitLeaseT& pl, edgelock::Clock& clock) {
  Lease l;
  l.target = edgelock::lease_target(pl);
  l.clock = &clock;
  l.token = pl.permit->id_bytes();
  l.release = [](void* p) -> edgelock::Status {
    PermitLeaseT* lease = static_cast<PermitLeaseT*>(p);
    return lease->semaphore->release(lease->permit);
  };
  l.error_text = [](const void* p) -> const char* {
    return cli::error_text(*static_cast<const PermitLeaseT*>(p)->semaphore);
  };
  return l;
}

// run: with the lease acquired, runs COMMAND, keeps the lease, releases
// it. Returns the exit code (run.cc).
int run_child(const Options& o, const Lease& lease);

}  // namespace cli
