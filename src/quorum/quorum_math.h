#pragma once
// The quorum lock's arithmetic (private, pure, unit-tested with a fake
// clock): majority size, validity after drift, and what a round's tally of
// per-server outcomes means.

#include <cstddef>
#include <cstdint>

#include "base/validity.h"
#include "edgelock/clock.h"
#include "edgelock/status.h"

namespace edgelock {
namespace detail {

/// A majority of n servers.
constexpr size_t quorum_of(size_t n) { return n / 2 + 1; }

/// Per-server outcomes of one round. Every wanted server is in exactly one
/// of yes / no / failed / unknown once the round is over.
struct Tally {
  size_t n = 0;        ///< Servers in the lock.
  size_t yes = 0;      ///< Granted / extended / confirmed.
  size_t no = 0;       ///< Definitive refusal (held by another, not ours).
  size_t failed = 0;   ///< Not sent, or the server replied with an error.
  size_t unknown = 0;  ///< Sent, no reply yet (pending, timed out, I/O error).
};

/// True once waiting for more replies cannot change the outcome: a majority
/// said yes, or too few are left to ever make one.
constexpr bool round_decided(size_t quorum, size_t yes, size_t still_waiting) {
  return yes >= quorum || yes + still_waiting < quorum;
}

/// Why an acquire round without a majority failed: a majority of refusals
/// is kBusy; otherwise, if the replies we never got could have completed a
/// majority, the outcome is unknown: kIndeterminate; otherwise too few
/// servers answered: kNoQuorum.
constexpr ErrorCode acquire_failure(const Tally& t) {
  if (t.no > t.n - quorum_of(t.n)) return ErrorCode::kBusy;
  if (t.unknown > 0 && t.yes + t.unknown >= quorum_of(t.n)) return ErrorCode::kIndeterminate;
  return ErrorCode::kNoQuorum;
}

/// Why an extend/owned round without a majority failed. `possible` counts
/// the servers that may still hold our token (all but the definitive noes
/// and those we never had): fewer than a majority means it is not ours.
constexpr ErrorCode keep_failure(const Tally& t, size_t possible) {
  if (possible < quorum_of(t.n)) return ErrorCode::kNotOwner;
  if (t.unknown > 0 && t.yes + t.unknown >= quorum_of(t.n)) return ErrorCode::kIndeterminate;
  return ErrorCode::kNoQuorum;
}

/// How long (ms) until `needed` more servers are free by expiry alone: the
/// needed-th shortest of the busy holders' TTLs ttls[0..n) (sorted in
/// place). 0 if no bound is known (needed is 0 or exceeds n: too few busy
/// replies with a TTL). A waiter can win only once a majority is free, so
/// neither the shortest TTL (too early) nor the longest (too late) is it.
inline int64_t majority_free_ms(int64_t* ttls, size_t n, size_t needed) {
  if (needed == 0 || needed > n) return 0;
  for (size_t i = 1; i < n; ++i) {
    for (size_t j = i; j > 0 && ttls[j] < ttls[j - 1]; --j) {
      const int64_t t = ttls[j];
      ttls[j] = ttls[j - 1];
      ttls[j - 1] = t;
    }
  }
  return ttls[needed - 1];
}

/// True if a lease granted with the quorum-th reply read at `decided_at`
/// and valid until `end` is still usable.
constexpr bool still_valid(TimePoint end, TimePoint decided_at) { return end > decided_at; }

}  // namespace detail
}  // namespace edgelock
