#pragma once
/// @file metrics.h
/// Heap-free counters for connections, and an optional event hook for
/// logging from firmware.
///
/// A Metrics block is a fixed set of 32-bit counters plus a small latency
/// histogram (kLatencyBuckets = 8 counters, 32 bytes; 64 bytes in all).
/// Every Connection keeps one, the one home for counters: every Lock,
/// FairLock, ReentrantLock, Semaphore and RateLimiter adds its operations
/// to the connection serving its key, which also counts its own
/// reconnects (a QuorumLock's servers count their reconnects; its rounds
/// are not counted). The application reads them at any time through
/// Connection::metrics(); nothing here allocates or locks. Counters wrap at
/// 2^32.
///
/// The event hook is a plain function pointer plus a context pointer (no
/// std::function): it is called synchronously, on the caller's thread, after
/// each operation; it must not call back into the same connection.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/status.h"

namespace edgelock {

/// Number of latency buckets.
constexpr size_t kLatencyBuckets = 8;
/// Inclusive upper bounds of all buckets but the last (open-ended).
constexpr Millis kLatencyBucketBounds[kLatencyBuckets - 1] = {
    Millis(1), Millis(2), Millis(5), Millis(10), Millis(50), Millis(200), Millis(1000)};

/// What an event reports.
enum class EventKind : uint8_t {
  kAcquire,    ///< One acquire attempt (lock, reentrant lock, semaphore).
  kAdmit,      ///< One rate limiter attempt.
  kRelease,    ///< A release.
  kExtend,     ///< An extend / refresh.
  kCheck,      ///< An ownership check.
  kReconnect,  ///< A connection came back after having been up before.
};

/// A short stable name ("acquire", "release", ...).
const char* to_string(EventKind kind);

/// One operation's outcome, passed to the hook. `key` is valid only during
/// the call.
struct Event {
  EventKind kind = EventKind::kAcquire;
  Status status;
  Bytes key;
  Nanos latency{0};  ///< Round trip of the operation (0 for kReconnect).
};

/// Called after each operation. `context` is the pointer given with it.
using EventHook = void (*)(const Event& event, void* context);

/// The counter block.
struct Metrics {
  uint32_t attempts = 0;     ///< Acquire/admit attempts (each retry counts).
  uint32_t grants = 0;       ///< Attempts that were granted / admitted.
  uint32_t busy = 0;         ///< Attempts refused: held or over the limit.
  uint32_t not_owner = 0;    ///< Release/extend/acquire refused: not ours.
  uint32_t timeouts = 0;     ///< Operations that ran out of time.
  uint32_t lost_leases = 0;  ///< Leases found gone by extend or a check.
  uint32_t reconnects = 0;   ///< Connects after the first one.
  uint32_t errors = 0;       ///< Other failures (I/O, server, protocol...).
  /// Attempt round trips, bucketed by kLatencyBucketBounds.
  uint32_t latency[kLatencyBuckets] = {};

  /// Counts one operation's outcome (and its latency, for attempts).
  void record(EventKind kind, Status status, Nanos latency);
};

/// The bucket index for a latency.
size_t latency_bucket(Nanos latency);

/// Writes the block as one line of "name=value" pairs (latency buckets as
/// "le1ms=..", .., "gt1000ms=..") into buf[cap], NUL-terminated, without
/// allocating. Returns the length, or kBufferTooSmall (304 bytes always
/// suffice: every counter at 2^32 - 1 makes 303 characters).
Result<size_t> format_metrics(const Metrics& m, char* buf, size_t cap);

}  // namespace edgelock
