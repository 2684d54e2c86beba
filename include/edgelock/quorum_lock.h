#pragma once
/// @file quorum_lock.h
/// A lock over N independent Redis servers (not replicas) that survives the
/// loss of a minority of them: the Redlock algorithm, with every request
/// fanned out in parallel on one thread and fencing tokens that stay
/// strictly increasing across the quorum.
///
/// Acquire: the same random token is SET-if-absent (PX ttl) on every server
/// at once over non-blocking sockets driven by one poll(). The lock counts
/// only if a majority (N/2+1) granted it and validity is left, where
/// validity = TTL - elapsed - drift; elapsed runs on the monotonic clock from
/// before the first request is sent to after the quorum-th reply is read, and
/// drift = TTL * drift_factor + 2 ms. The call returns as soon as the outcome
/// is decided. On failure it releases on every server that may hold the
/// token, including those whose reply never came (their SET may have
/// landed): there the release is queued (pipelined) behind the acquire on
/// the same connection, so the server runs it right after the acquire even
/// if it was frozen and answers only when it resumes. The connection stays
/// open; the late replies are read and discarded before its next request.
///
/// Fencing across the quorum (docs/quorum.md has the proof). Each server
/// keeps its own counter ({key}:fence), and two majorities may overlap in a
/// single server, so a fence counts only once a majority holds it:
///  1. the acquire proposes f = 1 + the highest counter seen for this key
///     (its grants' replies and the counter every busy reply carries; 1 for
///     a fresh lock); each granting server sets its counter to
///     max(counter + 1, f) atomically with the grant and returns it;
///  2. F = the maximum over the counted grants. If a majority of all
///     servers returned exactly F, F is final after this one round trip;
///  3. otherwise a write-back round raises the counter to F on the other
///     servers that may hold our key, each only while its lock key still
///     holds our token, and F counts once those that returned F and those
///     that confirmed make a majority.
/// Why it increases: the next grant G' needs a majority M', which meets
/// the majority that holds F in some server s. G' can take s only after our
/// key there is gone, i.e. after our counter write, so s returns more than
/// F to G', and G' takes the max over M'. No timing assumption is needed:
/// a holder that pauses past its validity, or crashes right after
/// returning, is followed by a larger fence, and a fenced resource rejects
/// the stale writes. When every server answers every round the counters
/// move in step and every acquire takes one round.
/// Limits: (a) a server that loses its counter (restart without AOF fsync,
/// failover to a lagging replica) can break the order if it is the only
/// overlap; run the servers with appendonly/appendfsync always, or restore
/// the counter (the highest of the other servers') before the server
/// rejoins; staying out for a TTL does not help the counter; (b) fences
/// have gaps and are only comparable for one key over one fixed server set;
/// (c) fences must stay below 2^53 (Lua numbers); (d)
/// QuorumOptions::fencing = false skips the write-back (fence() is then 0).
///
/// Mutual exclusion (unlike fencing) rests on Redlock's timing assumptions:
/// bounded clock drift between the servers and us, and servers that keep
/// their keys across a restart (or stay down for a TTL).
///
/// Memory: fixed arrays of kMaxQuorumServers; no heap after the first
/// connect of each server (a reconnect allocates, as in Connection).
/// A QuorumLock needs exclusive use of its connections: a request left in
/// flight by one call is read back by the next.

#include <cstddef>
#include <cstdint>

#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/fanout_slot.h"
#include "edgelock/detail/random.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {

class Connection;

namespace detail {
struct FanoutResult;
}  // namespace detail

struct QuorumOptions {
  /// Lease length on each server, up to kMaxTtl; must exceed the drift.
  Millis ttl{10000};
  /// Drift allowance factor, 0 .. 0.5 (see the file comment).
  double drift_factor = 0.01;
  /// Budget of one round per server: a dead, paused or partitioned server
  /// costs at most this per round. 0 = ttl / 50, at least 5 ms. Must be
  /// below the TTL.
  Nanos server_timeout{0};
  /// Random delays between acquire attempts (jittered, doubling). Each
  /// pair here: 0 < min <= max <= kMaxTtl.
  Nanos retry_min = Millis(5);
  Nanos retry_max = Millis(250);
  /// A server that did not answer is skipped by acquire/extend for a
  /// backoff doubling from down_min to down_max; the others keep serving.
  Nanos down_min = Millis(100);
  Nanos down_max = Millis(5000);
  /// Fencing tokens across the quorum (an extra round trip only when the
  /// servers' counters disagreed).
  bool fencing = true;
};

class QuorumLock final : public Lease {
 public:
  QuorumLock();
  /// Gives up requests still in flight on its connections (closes them).
  ~QuorumLock();
  QuorumLock(const QuorumLock&) = delete;
  QuorumLock& operator=(const QuorumLock&) = delete;

  /// Uses conns[0..n) (set up, distinct, sharing one clock, outliving the
  /// lock). No I/O. Errors: kInvalidArgument (n is 0 or > kMaxQuorumServers,
  /// null or repeated connection, clocks differ, key empty or longer than
  /// kMaxKeyLen, TTL/drift/timeouts out of range), kRandomFailed.
  Status init(Connection* const* conns, size_t n, Bytes key, const QuorumOptions& options = {});

  /// One attempt with a fresh token, no waiting. Returns within about
  /// 2 x server_timeout (a round, then the fence or clean-up round).
  /// Errors: kBusy (a majority refused: held by another), kNoQuorum (too
  /// few servers answered), kExpired (granted, but no validity was left;
  /// released again), kIndeterminate (a request went unanswered, so the
  /// outcome is unknown; a release was sent to, or queued behind the
  /// acquire on, every server that may hold it), kInvalidArgument (not
  /// init()ed, or already holding), kRandomFailed.
  Status try_acquire();
  /// Retries after random delays until `wait` has passed (kForever or
  /// negative = forever). Returns by wait + 2 x server_timeout at the latest. The
  /// delays are the backoff (retry_min .. retry_max), cut short when the
  /// holder's keys expire sooner (busy_ttl()); a holder without a TTL
  /// gives no such bound and the backoff stands. A retry keeps the token
  /// (a lost grant is re-armed) only if no request carrying it may still be
  /// on its way; otherwise it draws a fresh one, so a late release of the
  /// old attempt can never delete this attempt's grant.
  /// Errors: as try_acquire(); the last attempt's result when time is up.
  Status acquire(Nanos wait);
  /// Owner-checked delete on every server that may hold the token, in one
  /// round that returns within about server_timeout (one deadline for the
  /// whole round). held() is false afterwards whatever the outcome.
  /// Released on a majority is a release: it returns ok as soon as quorum()
  /// servers are known not to hold our token (they deleted it, answered
  /// that it was not ours, or never got it) and the release is written to
  /// every server it can reach, without waiting for the others' replies
  /// (read before this lock's next request there); released_on() says how
  /// many. A server that did not answer keeps the key until the release
  /// queued behind its last request runs, or its TTL ends; no other client
  /// needs it for a majority.
  /// The token is then forgotten.
  /// Errors: kNotHeld (no token), kNotOwner (a majority confirmed, but none
  /// deleted it: the lease had already ended), kIndeterminate (fewer than
  /// quorum() confirmed: it may still be held on a majority until the TTL
  /// ends; the token is kept and release() may be called again, while a new
  /// acquire forgets it).
  Status release() override;
  /// Owner-checked TTL raise on every server (kAdd: PTTL + ttl; kReplace:
  /// max(PTTL, ttl); never shorter, docs/late-requests.md); succeeds only if a majority
  /// extended before the current validity ran out and the new validity
  /// (shortest new TTL - elapsed - drift) is above 0; `ttl` > 0. The round
  /// stops at the end of the current validity.
  /// When it does not succeed the request may still have landed on some
  /// servers: with kReplace the validity becomes the lesser of the current
  /// one and what the request could have set (start + ttl - drift);
  /// with kAdd the current one stands.
  /// Errors: kInvalidArgument, kNotHeld, kExpired (no validity left before,
  /// or after it: held() is then false; the token is kept for release()),
  /// kNotOwner (a majority no longer holds our token; the lease is gone),
  /// kNoQuorum, kIndeterminate (too few answers: the validity as above).
  Status extend(Millis ttl, ExtendMode mode = ExtendMode::kAdd);
  /// extend(options().ttl, kReplace): at least the original TTL on every
  /// server. Errors: as extend().
  Status renew() override;
  /// Asks every server; true if a majority still holds our token, false
  /// (held() false) if too many say it does not. Decides at its majority.
  /// Errors: kNotHeld, kInvalidArgument (an operation in flight),
  /// kNoQuorum, kIndeterminate.
  Result<bool> owned();

  // --- Non-blocking face (docs/nonblocking.md). Each start_*() call
  // starts the blocking call of the same name and returns kInProgress
  // (then call step() until it returns anything else: the blocking call's
  // result), or the final status when it ended at once. Every round is
  // fanned out over the servers' sockets (wait_fds(): one per server in
  // flight); the backoff between attempts is a deadline, never a sleep. A
  // connect or reconnect inside a round runs as steps too (bounded by the
  // round and each connection's connect_timeout). One operation at a
  // time: a start_*() or blocking call while one is in flight returns
  // kInvalidArgument.
  /// try_acquire(). Errors: as try_acquire().
  Status start_try_acquire();
  /// acquire(wait). Errors: as acquire().
  Status start_acquire(Nanos wait);
  /// release(). Errors: as release().
  Status start_release() override;
  /// extend(ttl, mode). Errors: as extend().
  Status start_extend(Millis ttl, ExtendMode mode = ExtendMode::kAdd);
  /// renew(). Errors: as extend().
  Status start_renew() override;
  /// owned(): step() ends with ok (ours) or kNotOwner (not ours: held()
  /// false). Errors: as owned().
  Status start_owned();
  /// Moves the operation in flight (every server in flight; a recv() that
  /// finds nothing is cheap): kInProgress until done, then its result.
  /// Errors: the operation's; kInvalidArgument when none is in flight.
  Status step() override;
  /// Always true: a quorum lock runs over plain connections.
  bool nonblocking() const override { return true; }
  bool in_progress() const override { return op_ != Op::kNone; }
  /// One descriptor per server with a request in flight.
  size_t wait_fds(pollfd* out, size_t cap) const override;
  /// The round's deadline or the pause's end.
  Deadline next_deadline() const override;
  /// See Lease::cancel(). Requests in flight stay so: the next round's
  /// request is queued behind them on their connections (a release runs
  /// after a cancelled extend, never before it); an acquire's servers that
  /// may hold the token keep it for release().
  void cancel() override;

  /// Conservative validity left (0 if not held): held() while we hold it
  /// and the local validity has not run out. 0 while an acquire is in
  /// flight: a grant counts once step() ends it with ok.
  Nanos remaining() const override;
  /// Fencing token of the current grant (0 if none, fencing is off, or an
  /// acquire is in flight: its fence is final only after the write-back).
  uint64_t fence() const override { return acquiring() ? 0 : fence_; }
  Bytes token() const override { return n_ > 0 ? Bytes(token_, sizeof token_) : Bytes(); }
  Bytes key() const override { return keys_[0]; }
  size_t size() const { return n_; }
  size_t quorum() const { return n_ / 2 + 1; }
  /// The per-server round budget in use (after the default is applied).
  Nanos server_timeout() const;
  /// The connections' clock (default_clock() before init()).
  Clock& clock() const override;
  /// From the last acquire attempt: how long until enough holders'
  /// keys expire for a majority to be free, i.e. the (quorum() - granted)-th
  /// shortest TTL among the servers that refused. Not the shortest (one
  /// free server is not enough) nor the longest (a majority is free
  /// before). A round decided before every server answered gives an upper
  /// bound (a majority is free by then at the latest), at most kMaxTtl.
  /// 0 if unknown: a holder without TTL, too few answers.
  Millis busy_ttl() const { return busy_ttl_; }
  /// From the last release() (or the clean-up after a failed acquire):
  /// servers known not to hold our token (they
  /// deleted it, said it was not ours, or never got it). release() is ok
  /// only with at least quorum() of them.
  size_t released_on() const { return released_on_; }
  /// True while server i is skipped after failing to answer.
  bool server_down(size_t i) const;
  /// The last failing server's error text (for logs; "" if none).
  const char* last_error() const override;

 private:
  // Lease, for the keeper (through Lease&): server_timeout(), one round
  // per renewal.
  Nanos renew_budget() const override { return server_timeout(); }

  // The operation in flight, and where it is.
  enum class Op : uint8_t { kNone, kTry, kAcquire, kRelease, kExtend, kCheck };
  enum class Stage : uint8_t {
    kNone,
    kAcquire,
    kFence,
    kCleanup,
    kPause,
    kRelease,
    kExtend,
    kCheck
  };

  // quorum_lock_step.cc: the machine.
  Status begin_round(Stage stage, const detail::FanoutRequest& req, const detail::FanoutGoal& goal,
                     Deadline deadline);
  Status drive();
  Status round_done(const detail::FanoutResult& fr);
  Status run(Status s);
  void await();
  Status end_op(Status s);
  // quorum_lock.cc: acquire.
  Status begin_try();
  Status begin_acquire(Nanos wait);
  Status first_attempt();
  Status start_attempt(Deadline limit);
  Status after_acquire(const detail::FanoutResult& fr);
  Status start_fence();
  size_t agreed_on_fence() const;
  Status after_fence(const detail::FanoutResult& fr);
  Status cleanup(Status then);
  Status after_cleanup(const detail::FanoutResult* fr);
  Status attempt_done(Status s);
  Status next_attempt();
  void note_acquire();
  // quorum_lock_ops.cc: release, extend, bookkeeping.
  Status begin_release();
  bool start_release_round(Stage stage);
  size_t release_end(const detail::FanoutResult* fr);
  Status after_release(const detail::FanoutResult* fr);
  Status begin_extend(Millis ttl, ExtendMode mode);
  Status extend_request(Millis ttl, ExtendMode mode);
  Status after_extend(const detail::FanoutResult& fr);
  Status begin_check();
  Status after_check(const detail::FanoutResult& fr);
  Deadline round_deadline(Deadline limit) const;
  Deadline limit() const;
  Deadline round_limit() const;
  TimePoint attempt_end() const;
  bool acquiring() const { return op_ == Op::kTry || op_ == Op::kAcquire; }
  bool valid_now() const;
  Nanos down_step(uint8_t level) const;
  size_t note_owners(int64_t yes_min);
  Status finish_extend(TimePoint start, TimePoint decided_at, Millis ttl, ExtendMode mode);
  void want_holders(bool skip_down, TimePoint now);
  void note_servers(TimePoint now, bool timed_out);
  void abandon_in_flight();
  void forget();

  Connection* conns_[kMaxQuorumServers] = {};
  QuorumOptions options_;
  uint8_t key_[kMaxKeyLen] = {};
  char token_[32] = {};  // 128 random bits as hex
  detail::DecimalText ttl_text_;
  detail::DecimalText ms_text_;
  detail::DecimalText fence_text_;
  detail::DecimalText propose_text_;
  uint32_t attempts_ = 0;  // failed attempts of this acquire (the backoff's step)
  // The key (key()); its companion "{key}:fence" is named as a request is
  // encoded (ScriptCall::companions).
  Bytes keys_[1];
  // Request arguments, one array per script: a request left in flight may
  // be re-sent (NOSCRIPT) from these, so they never change kind. The
  // release and the ownership check send acquire_args_[0], the token.
  Bytes acquire_args_[3];
  Bytes extend_args_[3];
  Bytes fence_args_[2];
  // Per server: skipped until down_until_ after failing to answer, for a
  // step that doubles per failure in a row (down_level_: how many).
  TimePoint down_until_[kMaxQuorumServers] = {};
  detail::FanoutSlot slots_[kMaxQuorumServers];
  TimePoint valid_until_{};
  uint64_t fence_ = 0;
  // The highest fence counter any server reported for this key (grants and
  // busy replies); the next acquire proposes seen_ + 1.
  uint64_t seen_ = 0;
  Millis busy_ttl_{0};
  Prng rng_;
  Millis ext_ttl_{0};
  detail::FanoutRound round_;
  // When the release or extend was called (an extend's validity counts
  // from here).
  TimePoint op_t0_{};
  TimePoint attempt_start_{};                // before the attempt's first request left
  TimePoint resume_at_{};                    // the end of the pause between attempts
  Deadline wait_until_ = Deadline::never();  // the wait's end (limit(): + one round)
  // Small fields last: no padding between them.
  uint8_t n_ = 0;
  uint8_t released_on_ = 0;
  uint8_t last_failed_ = kMaxQuorumServers;
  uint8_t agreed_ = 0;  // grants that returned fence_ itself (fence round)
  uint8_t down_level_[kMaxQuorumServers] = {};
  bool maybe_holds_[kMaxQuorumServers] = {};  // a request carrying our token may have landed
  bool has_token_ = false;
  bool granted_ = false;
  // The operation in flight (start_*()/step()).
  Op op_ = Op::kNone;
  Stage stage_ = Stage::kNone;
  bool release_any_ = false;  // the release round has servers to ask
  ExtendMode ext_mode_ = ExtendMode::kAdd;
  Status then_;  // the attempt's result once the clean-up is done
};

}  // namespace edgelock
