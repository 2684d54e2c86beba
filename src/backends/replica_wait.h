#pragma once
// WAIT after a write (private), shared by the Sentinel and Cluster routers,
// in their blocking calls and as steps: a grant is reported only once
// enough replicas have it.

#include <cstdint>

#include "edgelock/connection.h"

namespace edgelock {
namespace detail {

/// A router's WAIT, over its own settings and storage (a view, made for
/// each call): both routers confirm grants through this one code.
struct WriteConfirm {
  int want;        ///< Replicas a grant needs (0: no WAIT).
  Nanos max_wait;  ///< WAIT's longest timeout.
  /// The grant kept while WAIT runs (WAIT's reply replaces it in the
  /// arena), and the array's integer elements.
  Reply (&keep)[4];
  Millis& sent;                 ///< The timeout of the WAIT started.
  uint32_t& failures;           ///< Counts WAITs with too few acknowledgements.
  char (&err)[kErrorTextSize];  ///< The router's error text.

  /// After a write on `conn` answered `reply`: only a grant or extension (a
  /// positive integer, or an array whose first element is one: the
  /// semaphore's, reentrant lock's and rate limiters' answers) needs `want`
  /// replicas. Then it is kept and `WAIT want timeout` is started on
  /// `conn`; the timeout, kept in `sent`, is `max_wait` cut to half of what
  /// is left of `deadline`, so the reply arrives in time. Returns ok with
  /// no reply: the WAIT's outcome comes from end(). Any other reply, or
  /// want == 0, is returned as it is. Errors: kProtocol (a grant array too
  /// long or not all integers: fail closed), Connection::start_command()'s.
  Result<const Reply*> start(Connection& conn, const Reply* reply, Deadline deadline);

  /// The WAIT's reply (or its failure) `wait`: the grant kept, or the error
  /// (text in `err`; kNoQuorum counted in `failures`). Errors:
  /// Connection::command()'s but the error replies, kProtocol, kNoQuorum
  /// (fewer than `want` acknowledged, or WAIT refused: the grant landed).
  Result<const Reply*> end(Connection& conn, const Result<const Reply*>& wait);
};

/// The WAIT of a router whose options have wait_replicas and wait_timeout
/// and whose stats have wait_failures (SentinelOptions, ClusterOptions),
/// over its grant storage and error text.
template <typename Options, typename Stats>
WriteConfirm confirm_over(const Options& options, Stats& stats, Reply (&keep)[4], Millis& sent,
                          char (&err)[kErrorTextSize]) {
  return WriteConfirm{
      options.wait_replicas, options.wait_timeout, keep, sent, stats.wait_failures, err};
}

}  // namespace detail
}  // namespace edgelock
