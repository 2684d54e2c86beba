#pragma once
/// @file fair_lock.h
/// A first-come-first-served lock on one Redis key (one server, the
/// primary Sentinel names, or the cluster node owning the key's slot).
/// Waiters queue on the server, in arrival order, and the lock goes to the
/// head of the queue only: a releaser that tries again at once queues
/// behind the others (no barging), so no waiter starves. With K contending
/// handles and holds of H, a wait lasts at most about
/// (K - 1) x (H + handoff) + one waiter_timeout (a dead waiter's slack)
/// + one TTL: a waiter frozen (stopped, not dead) while its wait is
/// pending may still be granted and then holds the lock until its TTL.
///
/// The key holds the holder's token as for Lock, with the same TTL,
/// owner-checked release and extend, fencing (the same "{key}:fence"
/// counter, so fences stay monotonic if a key moves between Lock and
/// FairLock) and local validity. Lock and FairLock on one key exclude each
/// other, but only FairLocks queue: a plain Lock can take the key whenever
/// it is free. Use one kind per key.
///
/// The queue lives in companion keys in the key's hash slot, unique per
/// key like Lock's (lock.h): "{key}:queue" (a hash: one entry per waiter
/// with its arrival number and deadline, an index from arrival number to
/// waiter and the lowest live arrival number, so a step costs a few
/// commands whatever the queue's length) and one wake list per waiter,
/// "{key}:w:<arrival number>"; "queue:{X}" and "w:<n>:{X}" for a key
/// "{X}". Each step (join, grant, release, leave) is one atomic script,
/// timed by the server's clock. A waiter blocks on its own wake list
/// (BLPOP, with its next attempt pipelined behind) and renews its place at
/// least every waiter_timeout / 2. On a back end other handles use (a
/// Connection, connection.h, or a Sentinel's or Cluster's node) a BLPOP
/// would hold the connection from them: there a waiter polls its turn
/// instead, one attempt per capped, jittered backoff pause (which also
/// renews its place), so a handoff costs up to one pause. The grant
/// tells the holder who is next, and its release wakes exactly that
/// waiter: a handoff costs what Lock's does, and no other waiter wakes.
/// One that crashes or stops waiting drops out of the queue waiter_timeout
/// after its last renewal, so it cannot block the rest; acquire() leaves
/// the queue itself when its wait ends. A waiter frozen (SIGSTOP) while
/// its attempt waits on the server behind its BLPOP may still be granted
/// when the BLPOP returns; the lock then frees at its TTL, as for a holder
/// that freezes.
///
/// Every call is also a start/step machine (the non-blocking face,
/// docs/nonblocking.md): the join, the wait on the wake list, the backoff
/// pauses and leaving the queue are its states, never a sleep.
///
/// Needs Redis 7 (or Valkey): scripts read TIME and write after it.

#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/connection.h"
#include "edgelock/detail/core_lease.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/lock.h"
#include "edgelock/status.h"

namespace edgelock {

/// What acquire() does with its place in the queue when its wait ends
/// without a grant.
enum class GiveUp : uint8_t {
  kLeave,  ///< Leave the queue (the default).
  kStay,   ///< Keep the place: the next acquire() goes on from it; leave()
           ///< gives it up (else it lapses waiter_timeout after the last
           ///< attempt). For callers that wait in slices.
};

struct FairLockOptions {
  /// Lease length; the server deletes the key after it. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// As LockOptions::drift_factor. 0 .. 0.5.
  double drift_factor = 0.01;
  /// Backoff between attempts when no wake signal can be waited for
  /// (connection errors, a holder without TTL, BLPOP refused).
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
  /// How long a queued waiter keeps its place without renewing it. A
  /// waiting acquire() renews at least every waiter_timeout / 2, so this
  /// bounds how long a crashed (or stopped) waiter can hold up the queue,
  /// at the cost of one round trip per waiter_timeout / 2 while waiting.
  /// 500 ms .. kMaxTtl. Half of it must cover the server's lateness in
  /// ending a BLPOP (up to its timer period, 1 / hz: 100 ms by default)
  /// plus a round trip, or a waiter lapses and queues again at the end.
  Millis waiter_timeout{2000};
};

class FairLock final : public detail::TokenLease {
 public:
  /// Uses `backend` (a Connection, Sentinel or Cluster) and its clock for
  /// every operation; it must outlive the lock.
  explicit FairLock(Backend& backend) : TokenLease(backend) {}
  FairLock(const FairLock&) = delete;
  FairLock& operator=(const FairLock&) = delete;

  /// Sets the key and options. No I/O. Errors: kInvalidArgument (empty or
  /// longer than kMaxKeyLen, TTL, drift, retry delays or waiter_timeout
  /// out of range, or a key the back end refuses: on a cluster, a key
  /// whose companion keys would land in another slot), kRandomFailed.
  Status init(Bytes key, const FairLockOptions& options = {});

  /// One attempt with a fresh token, without joining the queue: granted
  /// only if the lock is free and nobody is queued. Errors: kBusy (held,
  /// or others are queued), kExpired (granted, but the round trip used up
  /// the validity; released again), kInvalidArgument (not init()ed, or
  /// already holding: release first), kRandomFailed, kProtocol (reply
  /// neither a fence nor a busy answer: the connection is closed),
  /// kServerError (also: the fence counter is of the wrong type or at
  /// INT64_MAX, the text names it, and the key was not set; or a companion
  /// key of the wrong type), Connection::command()'s, and on Sentinel or
  /// Cluster Backend::eval()'s: kNoQuorum (replicas did not confirm the
  /// grant in time; released again), kBufferTooSmall.
  /// On kTimeout, kIo, kConnectionClosed or kProtocol (and kNoQuorum whose
  /// hand-back failed) the grant may have landed: held() is false but the
  /// token is kept, so call release() to remove it.
  Status try_acquire();
  /// Joins the queue (or, after a wait that kept its place, goes on from
  /// there with the same token) and waits until it is this handle's turn,
  /// for at most `wait` (kForever or negative = forever; 0 without a kept
  /// place = try_acquire()).
  /// While queued it blocks on its wake list (BLPOP) for at most the
  /// holder's remaining TTL, waiter_timeout / 2 and (where its next
  /// attempt is pipelined behind the BLPOP: a plain connection, and
  /// start_acquire() on Sentinel or Cluster) ttl / 4, then renews its
  /// place; else (also on a shared connection) it pauses with capped,
  /// jittered backoff (same caps). Connection failures are retried within
  /// the wait; retries keep the token (and so the place in the queue, and a
  /// grant whose reply was lost is recognised). A grant that came too late
  /// is handed back and the handle queues again, at the end. When the wait
  /// ends without a grant it leaves the queue (best effort: else it drops
  /// out after waiter_timeout), unless `give_up` is GiveUp::kStay. Returns
  /// by wait + command_timeout at the latest (and one more command_timeout
  /// to leave the queue). Allocates nothing.
  /// Errors: kBusy (not our turn by the end), kExpired (the last grant
  /// came too late), or the last connection error, or try_acquire()'s
  /// non-retryable ones. As there: on kTimeout, kIo, kConnectionClosed or
  /// kProtocol the grant may have landed: call release().
  Status acquire(Nanos wait, GiveUp give_up = GiveUp::kLeave);
  /// Gives up a place kept by acquire(wait, GiveUp::kStay); if it was the
  /// head of a free lock, wakes the next waiter. Errors: kNotHeld (no
  /// place kept), kInvalidArgument (an operation in flight), kProtocol,
  /// Connection::command()'s (the place then lapses after waiter_timeout).
  Status leave();
  /// True while this handle has a place in the queue (kept, or during a
  /// wait).
  bool queued() const { return joined_ && has_token_ && !granted_; }
  // release() (Lease): owner-checked delete (and leaves the queue if
  // queued, as after a failed or cancelled acquire); wakes the head of the
  // queue (one more round trip, best effort, if the head is not the waiter
  // the grant named: it left, or joined later). Afterwards held() is false
  // whatever the outcome. Errors: as Lock's release(): kNotHeld,
  // kNotOwner, kProtocol, Connection::command()'s (on Sentinel or Cluster
  // Backend::eval()'s); kInvalidArgument (an operation in flight). On
  // kProtocol and command errors the token is kept and release() may be
  // called again.
  // renew(), extend(), owned(), status(), adopt(), remaining(), token(),
  // fence() and busy_ttl(): as Lock's (TokenLease, detail/core_lease.h).

  // --- Non-blocking face (docs/nonblocking.md), as Lock's: each start_*()
  // call starts the blocking call of the same name and returns kInProgress
  // (then call step() until it returns anything else: the blocking call's
  // result), or the final status when it ended at once. The join, the
  // wait on the wake list (an fd), the backoff pauses (a deadline), a
  // hand-back, leaving the queue and waking the next waiter are steps,
  // never a sleep. On a Sentinel or Cluster every request goes to the
  // node Backend::route_for() names for the key (the
  // queue's keys share its slot), and redirects, READONLY and lookups are
  // steps too (docs/nonblocking.md); the wait on the wake list goes there
  // with the attempt pipelined behind it, as on a plain connection; a
  // BLPOP that a redirect or a failover ends costs a backoff pause, and
  // only the attempt's checked reply reports a grant (a resent attempt
  // goes alone). Handles on one Sentinel or Cluster share its node
  // connections: a request waits (nothing sent) while another handle's is
  // on its node, and with other handles there a waiter polls, never
  // BLPOPs, as on a shared Connection. A WAIT for replicas
  // (wait_replicas) is a step too. One operation at a time: a start_*()
  // or blocking call while one is in flight returns kInvalidArgument.
  // Handles sharing a Connection take turns on it (connection.h): a
  // request waiting its turn ends as kConnectionBusy if its deadline comes
  // first.
  /// try_acquire(). Errors: as try_acquire(), and kInvalidArgument as above.
  Status start_try_acquire();
  /// acquire(wait, give_up). Errors: as acquire(), and kInvalidArgument as
  /// above.
  Status start_acquire(Nanos wait, GiveUp give_up = GiveUp::kLeave);
  /// leave(). Errors: as leave(), and kInvalidArgument as above.
  Status start_leave();
  // start_release(), start_renew(), start_extend() and step(): as
  // Lock's.
  // nonblocking(), in_progress(), wait_fds(), next_deadline(), cancel(),
  // key(), last_error() and clock() are Lease's (lease.h).
  // cancel() (Lease) sends nothing more: a cancelled wait keeps its token,
  // so release() gives its place in the queue up at once; else the place
  // lapses waiter_timeout after its last attempt.

  /// Our place in the queue at the last busy attempt: 1 = next; waiters
  /// ahead that left are counted until the head passes them; 0 = not
  /// queued.
  uint32_t queue_position() const { return position_; }

 private:
  /// ":w:<seq>", the suffix of a waiter's wake list "{key}:w:<seq>".
  struct WakeSuffix {
    uint8_t text[24];  // ":w:" and 20 digits
    size_t len;
    explicit WakeSuffix(uint64_t seq);
    Bytes bytes() const { return Bytes(text, len); }
  };
  // The request in flight (an extend's is the core's).
  enum class Req : uint8_t {
    kAttempt,   // the acquire script (after a BLPOP, if pipelined)
    kBlpop,     // BLPOP alone (a back end that cannot route)
    kHandBack,  // release of a grant that came too late or unconfirmed
    kRelease,   // release()
    kLeave,     // leaving the queue (leave(), or a wait that ended)
    kWake,      // waking the head a release or leave found
    kLoad,      // SCRIPT LOAD, then the script call again
  };

  Status begin_try(bool nonblocking);
  Status begin_acquire(Nanos wait, GiveUp give_up, bool nonblocking);
  Status begin_leave(bool nonblocking);
  Status send_call(Req req, const ScriptCall& call, Deadline deadline);
  Status on_reply(const Result<const Reply*>& r) override;
  Status on_result(const Result<const Reply*>& r);
  Status start_attempt(Deadline deadline, Span<const Bytes> blpop = {});
  Status attempt_again(Deadline deadline) override { return start_attempt(deadline); }
  Millis lease_ttl() const override { return options_.ttl; }
  Status on_attempt(const Result<const Reply*>& r);
  Status on_grant(const Reply* rep);
  Status on_busy_reply(const Reply* rep);
  Status attempt_done(Status s) override;
  Status release_request(bool hand_back) override;
  Status on_release(const Result<const Reply*>& r);
  Status leave_request(Deadline deadline);
  Status on_leave(const Result<const Reply*>& r);
  Status wake_or_finish(Req after);
  Status finish(Req after);
  void forget() override;
  // fair_lock_wait.cc
  Status next_attempt(Status last, Nanos left);
  Status on_blpop(const Result<const Reply*>& r);
  Status load_script();
  Status on_load(const Result<const Reply*>& r);

  // Small fields first: short offsets, shorter code on Thumb-2.
  bool wake_supported_ = true;  // false after the server refused BLPOP
  bool joined_ = false;         // a join was sent since the last grant
  bool join_ = false;           // the attempts join the queue (acquire), else only try
  bool loaded_ = false;         // the request's script was loaded once after kBufferTooSmall
  bool blpop_failed_ = false;   // the BLPOP before the last attempt failed: pause first
  GiveUp give_up_ = GiveUp::kLeave;
  Req req_ = Req::kAttempt;
  Req load_for_ = Req::kAttempt;    // the request a SCRIPT LOAD sends again
  Req wake_after_ = Req::kRelease;  // what the wake request follows
  uint32_t position_ = 0;
  Millis hint_{0};         // last busy answer's wait_ms
  uint64_t seq_ = 0;       // our arrival number (0: not queued)
  uint64_t next_seq_ = 0;  // the waiter our grant named as next
  int64_t wake_seq_ = 0;   // the head a release or leave found, to wake (0: none)
  FairLockOptions options_;
  // The request in flight: its second number (the waiter timeout), its
  // companion suffixes and its call (sent again after a SCRIPT LOAD) live
  // until its reply is in, beside its words (TokenLease). The companion
  // keys ("{key}:fence", "{key}:queue", "{key}:w:<seq>") are named when a
  // request is encoded.
  detail::DecimalText num2_;
  WakeSuffix next_wake_{0};
  Bytes companions_[2];
  ScriptCall call_;
  Deadline call_deadline_ = Deadline::never();
};

}  // namespace edgelock
