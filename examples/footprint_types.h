#pragma once
// The public types whose fixed RAM docs/footprint.md lists, in its order:
// footprint.cc prints them, and tests/unit/footprint_sizes_test.cc holds
// each target's committed figures to the build's sizeof.

#define EDGELOCK_FOOTPRINT_TYPES(X) \
  X(edgelock::Connection)           \
  X(edgelock::Lock)                 \
  X(edgelock::FairLock)             \
  X(edgelock::ReentrantLock)        \
  X(edgelock::Semaphore)            \
  X(edgelock::RateLimiter)          \
  X(edgelock::Endpoint)             \
  X(edgelock::resp::Parser)         \
  X(edgelock::ConnectionOptions)    \
  X(edgelock::QuorumLock)           \
  X(edgelock::LeaseKeeper)          \
  X(edgelock::Cluster)              \
  X(edgelock::Sentinel)
