#pragma once
/// @file reentrant_lock.h
/// A lock the same owner may take again: the server keeps a hash
/// {owner, depth, fence} under the key. The owner is an id chosen by the
/// caller (e.g. "task:modem-watchdog") or a generated random one — never a
/// thread id. Each acquire on the same handle adds one level and refreshes
/// the TTL; the lock is free again only after as many releases. A non-owner
/// can neither release nor extend it (the owner check runs inside the
/// script). Works with LockGuard (one guard = one level) and LeaseKeeper
/// (renew() refreshes the TTL, keeping the depth).
///
/// Lost replies: every script carries the depth the handle expects after
/// the call and the most levels it may hold (from requests whose outcome it
/// never learnt), so a retry after a lost reply is recognised and not
/// counted twice, and release() can remove a level that landed unseen. The handle is the unit of
/// re-entry: the hash also records a random per-handle nonce, so a second handle with the same
/// owner id (say the same task restarted) is busy until the first one's levels are released or
/// expire; it never inherits or corrupts them.
///
/// Fencing: fence() is taken (INCR of a companion key) on the first level
/// only and stays the same for the re-entries of that grant.
///
/// Quorum variant: not provided. A Redlock-style majority of these hashes
/// would need every server's depth to move in lock step; a partial failure
/// (depth 3 on two servers, 2 on the third) has no safe repair without a
/// second round, and the single-instance handle already fails closed. Use
/// a QuorumLock for the outer grant and count re-entry in the caller.

#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/connection.h"
#include "edgelock/detail/core_lease.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {

struct ReentrantLockOptions {
  /// Lease length, refreshed on every acquire. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// As LockOptions::drift_factor. 0 .. 0.5.
  double drift_factor = 0.01;
  /// Retry delays while waiting for another owner.
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
};

class ReentrantLock final : public detail::CoreLease {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock; it
  /// must outlive the lock.
  explicit ReentrantLock(Backend& backend) : CoreLease(backend) {}
  ReentrantLock(const ReentrantLock&) = delete;
  ReentrantLock& operator=(const ReentrantLock&) = delete;

  /// Sets key, options and owner id (empty = 32 random hex chars). No I/O.
  /// Errors: kInvalidArgument (key empty/too long or refused by the back
  /// end, owner longer than kMaxTokenLen, options out of range),
  /// kRandomFailed.
  Status init(Bytes key, const ReentrantLockOptions& options = {}, Bytes owner = Bytes());

  /// One attempt: depth 0 -> 1, or (already held) depth + 1 with a fresh
  /// TTL (max(the key's TTL, options().ttl): never shorter). Errors: kBusy
  /// (another owner holds it), kNotOwner (we held it but it expired or the
  /// depth changed under us: all levels are lost; when a request given up
  /// on changed the depth, the key is still ours and release() deletes
  /// it), kExpired (granted, but
  /// the round trip used up the validity; handed back), kServerError (the
  /// fence counter is not a count below 2^53 or not a string: nothing
  /// written; text in last_error()), kInvalidArgument (not init()ed, or
  /// depth at 2^31), kProtocol, and
  /// Connection::command()'s (on Sentinel or Cluster Backend::eval()'s,
  /// kNoQuorum: replicas did not confirm the level). After kProtocol,
  /// kNoQuorum and the connection errors that leave the outcome unknown
  /// (kTimeout, kIo, ...) the level may have landed: it is not counted in
  /// depth() nor claimed, but the handle remembers it, so retrying acquire
  /// is safe (not counted twice) and release() removes it (at depth 0, or
  /// together with the level release() drops). The validity then is the
  /// lesser of the old one and what the attempt may have set (re-entry
  /// re-arms the TTL to at least options().ttl).
  Status try_acquire();
  /// Tries until `wait` has passed (kForever or negative = forever) with
  /// backoff.
  /// Errors: kBusy at the end, the last connection error or kExpired, or
  /// try_acquire()'s non-retryable ones; after a failure, release() cleans
  /// up a level that may have landed (see try_acquire()).
  Status acquire(Nanos wait);
  // release() (Lease): drops one level (the last one deletes the key; others refresh the
  // TTL, and OK means the levels left have validity). Errors: kNotHeld
  // (nothing counted or possibly left), kNotOwner (expired or taken, or a
  // retried release that had already landed: all levels are forgotten; when
  // a request given up on changed the depth, the key is still ours and the
  // next release() deletes it),
  // kExpired (the level was dropped, but the refreshed TTL came back too
  // late: the levels left are not claimed; release() them or extend()),
  // kProtocol, Connection::command()'s. After kProtocol and the errors
  // that leave the outcome unknown the level is no longer counted (at
  // depth 1 the lock is no longer held) but remembered: call release()
  // again to make sure it is gone; the levels left are then claimed for
  // the lesser of the old validity and start + ttl - drift.
  /// Owner-checked TTL raise to at least `ttl` (> 0; never shorter: a
  /// request given up on may run after a later one); keeps the depth. Waits no
  /// later than the end of the validity (nor the command timeout): a
  /// renewal that does not come back in time is a loss. OK only if
  /// validity is left afterwards.
  /// Errors: kInvalidArgument, kNotHeld, kNotOwner, kExpired (the validity
  /// ended before the answer, or `ttl` is within the drift allowance: not
  /// held, the levels are kept for release()), kProtocol,
  /// Connection::command()'s (kNoQuorum on Sentinel or Cluster with WAIT).
  /// When the outcome is unknown the validity becomes the lesser of the
  /// old one and start + ttl - drift.
  Status extend(Millis ttl) { return drive(begin_extend(ttl, ExtendMode::kReplace, false)); }
  // renew() (Lease): extend(options().ttl). Errors: as extend().

  // --- Non-blocking face (docs/nonblocking.md; as Lock's): where
  // nonblocking() is true (a plain Connection, or a Sentinel or Cluster
  // after init(); else kInvalidArgument), one operation at a time (a second
  // start or blocking call returns kInvalidArgument).
  /// try_acquire(). Errors: as try_acquire().
  Status start_try_acquire();
  /// acquire(wait). Errors: as acquire().
  Status start_acquire(Nanos wait);
  /// extend(ttl). Errors: as extend().
  Status start_extend(Millis ttl) { return begin_extend(ttl, ExtendMode::kReplace, true); }
  // start_release(), start_renew() and step(): Lease's.
  // nonblocking(), in_progress(), wait_fds(), next_deadline(), cancel(),
  // key(), last_error() and clock() are Lease's (lease.h).

  /// Levels held by this handle: 0 while not held() (the validity ran out,
  /// or the lock was never confirmed), even if release() has levels to
  /// clean up.
  uint32_t depth() const;
  /// Conservative validity left (0 if not held): held() while depth > 0
  /// and the local validity has not run out.
  Nanos remaining() const override;
  /// The owner id; token() (Lease) too.
  Bytes owner() const { return token(); }
  /// The grant's random nonce (stored in the hash as "handle"): new for
  /// every grant from depth 0, so a request of an earlier grant given up on
  /// can never act on a later one (docs/late-requests.md).
  Bytes handle() const { return Bytes(handle_, sizeof handle_); }

 private:
  // The request in flight of an acquire or release (an extend's is the
  // core's).
  enum class Req : uint8_t { kAttempt, kHandBack, kRelease };
  Status begin_acquire(bool wait_too, Nanos wait, bool nonblocking);
  Status start_attempt(Deadline deadline);
  Status attempt_again(Deadline deadline) override { return start_attempt(deadline); }
  Millis lease_ttl() const override { return options_.ttl; }
  Status on_reply(const Result<const Reply*>& r) override;
  Status on_attempt(const Result<const Reply*>& r);
  Status attempt_done(Status s) override;
  Status release_request(bool hand_back) override;
  Status on_release(const Result<const Reply*>& r);
  // The extend sets the TTL to at least `ttl`: `mode` is kReplace.
  Status extend_request(Millis ttl, ExtendMode mode) override;
  Status on_extend(const Result<const Reply*>& r) override;
  void forget();
  void lose_levels();
  void maybe_holds(uint32_t levels);
  void unknown_outcome(uint32_t most, TimePoint start, Millis ttl);
  Status send(const Script& script, bool fenced, size_t nargs, bool writes, Deadline deadline);

  // The request in flight's words; "{key}:fence", the fencing counter, is
  // named as it is encoded (ScriptCall::companions).
  detail::RequestWords<5, 3> words_;
  ReentrantLockOptions options_;
  char handle_[16] = {};
  uint32_t depth_ = 0;  // levels counted (release() drops one)
  uint32_t most_ = 0;   // levels the server may hold: >= depth_ after unknown outcomes
  uint32_t want_ = 0;   // the depth the request in flight asks for
  Req req_ = Req::kAttempt;
  TimePoint attempt_start_{};  // the attempt's request left after this
};

}  // namespace edgelock
