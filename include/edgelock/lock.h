#pragma once
/// @file lock.h
/// A lock on one Redis key (one server, the primary Sentinel names, or the
/// cluster node owning the key's slot): SET-if-absent with a TTL,
/// owner-checked release and extend, a fencing token per grant, and a
/// conservative local validity measured on the monotonic clock.
///
/// Fencing: every grant returns fence() — a 64-bit number strictly greater
/// than any handed out before for this key on this server (INCR of a
/// companion counter in the same script). A guarded resource remembers the
/// highest fence it has accepted and rejects any write that carries a lower
/// one, so a holder that paused past its TTL cannot clobber the next one.
///
/// Companion keys share the lock key's cluster slot and are unique per lock
/// key: "{key}:fence" and "{key}:wake" for a key without '{'; for a key that
/// is one whole hash tag, "{X}", they are "fence:{X}" and "wake:{X}" (else
/// "X" and "{X}" would share them); any other key with '{' gets
/// "key:fence" and "key:wake".
///
/// Unknown outcomes (a timeout, a lost reply, replicas that did not
/// confirm): for safety the lock assumes it holds less (held() and
/// remaining() never claim more than the server may have), for cleanup that
/// it may still hold the key (the token is kept, so release() can remove it).

#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/detail/core_lease.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/status.h"

namespace edgelock {

struct LockOptions {
  /// Lease length; the server deletes the key after it. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// Local validity = ttl - elapsed - (ttl * drift_factor + 2 ms): allows
  /// for the server's clock running faster than ours. 0 .. 0.5.
  double drift_factor = 0.01;
  /// Retry delays while waiting for a busy lock (used when no wake signal
  /// can be waited for: connection errors, a holder without TTL, a server
  /// older than Redis 6, or wake_on_release = false). 0 < retry_min <=
  /// retry_max <= kMaxTtl, here and in every lease's options.
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
  /// Waiting without polling: release() leaves a signal on a companion list
  /// ("{key}:wake", see above) and a waiting acquire() blocks on it with BLPOP, so a
  /// released lock is handed over within about one round trip. Not on a
  /// back end other handles use: the BLPOP would hold it from them. Every lock
  /// on a key should agree on this; a releaser with it off (or another
  /// client library) just makes waiters fall back to the caps below.
  bool wake_on_release = true;
  /// Longest single blocking wait; each is jittered in [fallback/2,
  /// fallback] and never longer than the holder's remaining TTL, so a
  /// holder that crashes without releasing costs at most its TTL.
  Nanos wake_fallback = Millis(500);
};

class Lock final : public detail::TokenLease {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock for
  /// every operation; it must outlive the lock.
  explicit Lock(Backend& backend) : TokenLease(backend) {}
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  /// Sets the key and options. No I/O. Errors: kInvalidArgument (empty or
  /// longer than kMaxKeyLen, TTL, drift, retry delays or wake_fallback
  /// (< 2 ms) out of range, or a key the back end refuses: on a cluster, a
  /// key whose companion keys would land in another slot), kRandomFailed.
  Status init(Bytes key, const LockOptions& options = {});

  /// One attempt, no waiting, with a fresh token. Errors: kBusy, kExpired
  /// (granted, but the round trip used up the validity; released again),
  /// kInvalidArgument (not init()ed, or already holding: release first),
  /// kRandomFailed, kProtocol (reply not an integer: the connection is
  /// closed), kServerError (also: the fence counter is of the wrong type or
  /// at INT64_MAX; the text names it and nothing was written),
  /// Connection::command()'s, and on Sentinel or Cluster Backend::eval()'s:
  /// kNoQuorum (replicas did not confirm the grant in time; the lock was
  /// released again), kBufferTooSmall.
  /// On kTimeout, kIo, kConnectionClosed or kProtocol (and kNoQuorum whose
  /// hand-back failed) the grant may have landed: held() is false but the
  /// token is kept, so call release() to remove it (else it stays until
  /// its TTL). A later try_acquire() starts with a new token.
  Status try_acquire();
  /// Tries until `wait` has passed (kForever or negative = forever). While the lock is
  /// busy it blocks on the release signal (see LockOptions::wake_on_release)
  /// for at most the holder's remaining TTL, else it sleeps with capped,
  /// jittered exponential backoff. Connection failures are retried within
  /// the wait too. Retries keep the token, so a grant whose reply was lost
  /// is recognised (and a grant that came too late, handed back, can be
  /// granted again), except after a hand-back of unknown outcome: the next
  /// attempt has a new token, so the late delete cannot hit its grant.
  /// A busy key without TTL gets the backoff (retry_min .. retry_max).
  /// Returns by wait + command_timeout at the latest (the last round trip's
  /// budget). Allocates nothing.
  /// Errors: kBusy (still held by another at the end), kExpired (the last
  /// grant came too late), or the last connection error, or try_acquire()'s
  /// non-retryable ones. As there: on kTimeout, kIo, kConnectionClosed
  /// (also from the pipelined wait + attempt) or kProtocol the grant may
  /// have landed: call release().
  Status acquire(Nanos wait);
  // release() (Lease): owner-checked delete. Afterwards held() is false
  // whatever the outcome (the delete may have run even if its reply never
  // came), and the token is retired: extend() refuses it and the next
  // grant has a new one. Errors: kNotHeld (no token: nothing to release;
  // also when the token comes from an acquire that never saw a grant, e.g.
  // one cancel()ed while waiting, and the server holds nothing of it),
  // kNotOwner (granted, then expired and maybe taken: the other holder's
  // key is left alone), kInvalidArgument (an operation in flight),
  // kProtocol (reply other than 0/1: connection closed), and
  // Connection::command()'s (on Sentinel or Cluster Backend::eval()'s). On
  // kProtocol and command errors the token is kept and the key may still
  // be there until its TTL: release() may be called again (a retry after
  // a delete that did run says kNotOwner).
  // renew() (Lease): extend(options().ttl, kReplace), at least the
  // original TTL (never shorter). Errors: as extend().
  // extend(), owned(), status(), adopt() and remaining() are TokenLease's
  // (detail/core_lease.h); token(), fence() and busy_ttl() CoreLease's.

  // --- Non-blocking face (docs/nonblocking.md). Each start_*() call
  // starts the blocking call of the same name and returns kInProgress
  // (then call step() until it returns anything else: the blocking call's
  // result), or the final status when it ended at once. The wait's backoff
  // and the BLPOP wake-up are a deadline and an fd, never a sleep. A
  // connect or reconnect inside runs as steps too (socket, TLS, AUTH and
  // SELECT; bounded by connect_timeout), never blocking.
  // Plain Connection, Sentinel or Cluster (a failover, a redirect and a
  // WAIT for replicas are steps too, docs/nonblocking.md). One operation
  // at a time: a start_*() or blocking call while one is in flight returns
  // kInvalidArgument. Handles sharing a Connection take turns on it
  // (connection.h): a request waiting its turn ends as kConnectionBusy if
  // its deadline comes first, or at once when the connection's queue is
  // full.
  /// try_acquire(). Errors: as try_acquire().
  Status start_try_acquire();
  /// acquire(wait). Errors: as acquire().
  Status start_acquire(Nanos wait);
  // start_release(), start_renew(), start_extend() and step(): as
  // Lease's and TokenLease's (their blocking calls as steps).
  // nonblocking(), in_progress(), wait_fds(), next_deadline(), cancel(),
  // key(), last_error() and clock() are Lease's (lease.h).

 private:
  // The request in flight of an acquire or release (an extend's is the
  // core's).
  enum class Req : uint8_t { kAttempt, kBlpop, kHandBack, kRelease };
  Status begin_try(bool nonblocking);
  Status begin_acquire(Nanos wait, bool nonblocking);
  Status first_attempt();
  Status start_attempt(Deadline deadline, Span<const Bytes> blpop = {});
  Status attempt_again(Deadline deadline) override { return start_attempt(deadline); }
  Millis lease_ttl() const override { return options_.ttl; }
  Status on_reply(const Result<const Reply*>& r) override;
  Status on_attempt(const Result<const Reply*>& r);
  Status attempt_done(Status s) override;
  Status release_request(bool hand_back) override;
  Status on_release(const Result<const Reply*>& r);
  void forget() override;
  // lock_wait.cc
  Status next_attempt(Status last, Nanos left);
  Status on_blpop(const Result<const Reply*>& r);

  bool attempted_ = false;      // the token went out in an acquire (not adopt())
  bool wake_supported_ = true;  // false after the server refused BLPOP
  Req req_ = Req::kAttempt;
  // The companion keys of a request ("{key}:fence", the fencing counter,
  // and "{key}:wake", the release signal) are named as it is encoded.
  LockOptions options_;
};

}  // namespace edgelock
