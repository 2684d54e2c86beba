#pragma once
/// @file sentinel.h
/// Locks on a Redis primary watched by Redis Sentinel. The sentinels are
/// asked in turn for the primary (SENTINEL get-master-addr-by-name), the
/// answer is checked with ROLE, and the primary is looked up again after a
/// failover (a READONLY reply from a demoted primary, a refused connect, or
/// an I/O error). Optionally every grant and extension is confirmed by
/// replicas (WAIT) before it is reported. Without WAIT the primitives'
/// start_*()/step() work here too, the lookup running as steps
/// (docs/nonblocking.md). What this can and cannot promise across a
/// failover: docs/sentinel-cluster.md.
///
/// Usage:
///   Sentinel sentinel;
///   sentinel.init("redis-sentinel://10.0.0.1:26379,10.0.0.2:26379/gw");
///   Lock lock(sentinel);

#include <cstddef>
#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/connection.h"
#include "edgelock/limits.h"

namespace edgelock {

namespace detail {
struct WriteConfirm;
}  // namespace detail

struct SentinelOptions {
  /// After an acquire or extend that succeeded on the primary, WAIT until
  /// this many replicas have it; fewer acknowledgements fail the operation
  /// with kNoQuorum (an acquire is released again). 0 = no WAIT.
  int wait_replicas = 0;
  /// Longest time WAIT may block (also capped by the operation's deadline).
  Nanos wait_timeout = Millis(200);
  /// Ask the sentinels again before an operation when the last answer is
  /// older than this (one round trip to a sentinel, over a kept-open
  /// connection). A primary deposed by a failover keeps accepting writes
  /// until Sentinel demotes it, which can take seconds, so without this the
  /// client notices only then. 0 = only after errors.
  Nanos recheck_interval = Millis(1000);
  /// AUTH for the sentinels (their own `requirepass`/ACL user), copied at
  /// init(); nullptr = none. The URL's credentials are for the primary.
  const char* sentinel_user = nullptr;
  const char* sentinel_password = nullptr;
  /// Pause between rounds of asking the sentinels while no primary is
  /// available (failover in progress).
  Nanos retry_pause = Millis(50);
};

/// Counters kept by a Sentinel (fixed size, no heap).
struct SentinelStats {
  uint32_t resolves = 0;         ///< Primaries found (and verified, if new).
  uint32_t primary_changes = 0;  ///< Resolves that found a different primary.
  uint32_t readonly = 0;         ///< READONLY replies (demoted primary).
  uint32_t wait_failures = 0;    ///< WAITs with too few acknowledgements.
};

class Sentinel final : public Backend {
 public:
  Sentinel() = default;
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;

  /// Parses `redis-sentinel://[user:pass@]host:port[,host:port...]/NAME[?db=N]`
  /// (credentials and db are for the primary; sentinels get
  /// sentinel_options' AUTH, if any) and keeps the options. No I/O: the
  /// sentinels are asked at first use (or by resolve()), and a sentinel or
  /// primary given by host name is looked up by its connection's first
  /// connect (Connection::resolve()).
  /// Errors: kInvalidArgument (malformed URL, no master name, more than
  /// kMaxSentinels, bad options), kBufferTooSmall (a part or a sentinel
  /// credential exceeds its capacity).
  Status init(const char* url, const ConnectionOptions& options = {},
              const SentinelOptions& sentinel_options = {});

  /// Asks the sentinels, starting with the last one that answered, for the
  /// primary and checks with ROLE that it is one. Connects (allocates).
  /// A node whose ROLE reply does not fit the reply buffer is not
  /// confirmed (fail closed): a primary with more than 3 replicas cannot be
  /// verified with the default kReplyNodes.
  /// Errors: kNotConnected (no sentinel named a node that is a primary:
  /// failover in progress, unknown master name, or ROLE too large to
  /// read), kInvalidArgument (before init()), kTimeout, kProtocol (a
  /// malformed address from a sentinel), or the last sentinel's or the
  /// primary's Connection::command() error.
  Status resolve(Deadline deadline);

  /// The connection to the current primary.
  Connection& primary() { return primary_; }
  const SentinelStats& stats() const { return stats_; }

  Clock& clock() const override { return *clock_; }
  const char* last_error() const override { return error_; }

 private:
  // Backend, for the primitives (they call these through Backend&).
  // eval()/command() are the routed steps below driven to their end
  // (detail::call_routed()): one way to route, blocking or not.
  Status check_key(Bytes key) override;
  Result<const Reply*> eval(const ScriptCall& call, Deadline deadline) override;
  Result<const Reply*> command(Bytes key, Span<const Bytes> args, Deadline deadline) override;
  Connection& connection_for(Bytes key) override;
  Nanos command_timeout() const override { return options_.command_timeout; }

  // Routing for the non-blocking face (start_*()/step() of the primitives,
  // src/backends/sentinel_step.cc). Served after init(); with wait_replicas
  // a grant's WAIT is one more step on the primary (start_confirm()).
  //
  // route_for() names primary() while it is known and verified (no I/O).
  // When the primary must be looked up (first use, recheck_interval
  // passed, or after one of the failures below) route_for() names none
  // and route_pending() runs the lookup as states: SENTINEL
  // get-master-addr-by-name to each sentinel in turn, then ROLE on a
  // primary that changed or is not connected, each started on its
  // Connection and advanced with non-blocking I/O, given up after one
  // command timeout (a stopped sentinel: the next is asked), with
  // retry_pause between rounds. The lookup gives no fd to wait on: the
  // request polls it through next_deadline() every 2 ms.
  // The request's own deadline bounds the wait; a lookup error a pause
  // cannot fix (kNoAuth, ...) ends it.
  //
  // on_routed_error(): READONLY (a demoted primary) and a connection that
  // failed before the request was sent (refused connect) send it again
  // to the primary the lookup finds. After an I/O error or a timeout
  // (outcome unknown) the error is the request's outcome and the next
  // request looks the primary up first, as it does whenever the
  // primary's connection is closed: a request in flight on a primary that
  // froze ends by its deadline (kTimeout), which closes it. LOADING and BUSY are the
  // request's outcome (retryable: a wait tries again), as in the blocking
  // calls: the node is not replaced for them. A primary or sentinel given
  // by host name is looked up by its connection's first connect, inside
  // a step (DNS may block): give IP literals for a loop that must never
  // block.
  const detail::LeaseRouter* router() const override;
  Connection* route_for(Bytes key) override;
  RouteNext route_pending(Bytes key) override;
  RouteNext on_routed_error(Connection& node, Bytes key, Status s) override;
  Result<const Reply*> start_confirm(Connection& node, const Reply* reply,
                                     Deadline deadline) override;
  Result<const Reply*> end_confirm(Connection& node, const Result<const Reply*>& wait) override;

  // Its own state and steps.
  enum class Lookup : uint8_t { kIdle, kNext, kAsking, kChecking, kPausing };
  Status aim_probe(size_t index);
  Status ask(size_t index, Deadline deadline, Endpoint* primary);
  Status parse_primary(const Reply& rep, Endpoint* primary);
  Status check_role(Deadline deadline);
  Status role_verdict(Result<const Reply*> r);
  void found(size_t index);
  Status lookup_step();
  Status lookup_ask();
  Status lookup_asked();
  Status lookup_checked();
  Status lookup_failed(Status s);
  void abandon_lookup();
  Result<const Reply*> settle(const Result<const Reply*>& c);
  detail::WriteConfirm confirmer();  // the WAIT over sentinel_options_ (replica_wait.h)
  Status note(Connection& conn, Status s);

  Endpoint sentinels_[kMaxSentinels];
  size_t sentinel_count_ = 0;
  size_t preferred_ = 0;  // the sentinel that answered last
  Endpoint creds_;        // user, password, db of the primary
  char name_[kMaxMasterNameLen + 1] = {};
  ConnectionOptions options_;
  SentinelOptions sentinel_options_;
  Clock* clock_ = &default_clock();
  Connection probe_;    // to a sentinel
  Connection primary_;  // to the primary
  bool initialized_ = false;
  bool stale_ = true;                          // look the primary up before the next command
  Lookup lookup_ = Lookup::kIdle;              // the steps' lookup (route_pending())
  uint8_t lookup_index_ = 0;                   // the sentinel it asks, after preferred_
  Status lookup_last_;                         // why the last sentinel asked gave none
  Deadline lookup_until_ = Deadline::never();  // the exchange's end, or the pause's
  TimePoint resolved_at_{};
  char verified_host_[kMaxHostLen + 1] = {};  // the primary last verified
  uint16_t verified_port_ = 0;
  Reply confirmed_[4];   // a reply a WAIT confirmed, and its elements (replica_wait.h)
  Millis wait_sent_{0};  // the timeout of the last WAIT started as a step
  SentinelStats stats_;
  char error_[kErrorTextSize] = {};
};

}  // namespace edgelock
