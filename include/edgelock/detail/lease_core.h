#pragma once
// Internal: what every primitive (Lock, FairLock, ReentrantLock, Semaphore,
// and the rate gate under RateLimiter) holds by composition
// (src/lease/lease_core.cc): the back end, the key checked once with its
// companion keys, the timing checked once, one validity rule, token
// minting, counting into the serving connection, the bounded wait of
// every acquire (its retries and backoff), and the operation in flight of the non-blocking face
// (one request or pause at a time, the wait around it, and the blocking
// driver that makes the blocking calls loops over it). Fixed size, no heap.

#include <poll.h>

#include <cstddef>
#include <cstdint>

#include "edgelock/backend.h"
#include "edgelock/bytes.h"
#include "edgelock/clock.h"
#include "edgelock/detail/random.h"
#include "edgelock/lease.h"
#include "edgelock/limits.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {

struct Reply;                    // edgelock/reply.h: only pointers to it here
enum class EventKind : uint8_t;  // edgelock/metrics.h
namespace detail {

/// The timing a primitive's options carry, checked once by init().
struct LeaseTiming {
  /// Lease (or period, window) length. 1 ms .. kMaxTtl.
  Millis ttl{10000};
  /// Local validity = ttl - elapsed - (ttl * drift_factor + 2 ms). 0 .. 0.5.
  double drift_factor = 0.01;
  /// Backoff between attempts while waiting. 0 < retry_min <= retry_max.
  Nanos retry_min = Millis(2);
  Nanos retry_max = Millis(250);
};

/// The timing of a primitive's options (each has these four fields).
template <class Options>
LeaseTiming timing_of(const Options& o) {
  return {o.ttl, o.drift_factor, o.retry_min, o.retry_max};
}

/// A companion key's name ("{key}:wake", "{key}:w:<seq>") built on the
/// stack for a command sent at once (BLPOP, a blocking call): a handle
/// keeps its key only, and a script call names its companions when it is
/// encoded (ScriptCall::companions).
struct CompanionKey {
  size_t len = 0;
  uint8_t data[kMaxKeyLen + 32];  // ":w:" and 20 digits fit
  /// Names the companion of `key` with `suffix`. Errors: kInvalidArgument
  /// (does not fit).
  Status set(Bytes key, Bytes suffix);
  Bytes bytes() const { return Bytes(data, len); }
};

/// Longest companion name init() accepts: every key up to kMaxKeyLen has
/// its ":fence", ":wake" and ":queue" (eval_capacity.h counts on it).
constexpr size_t kMaxCompanionLen = kMaxKeyLen + 8;

/// Which failures a wait retries.
enum class RetryOn : uint8_t {
  kTransient,  ///< Busy, expired (late grant) and connection trouble.
  kRefusal,    ///< Busy and expired only (rate limiters).
};

/// Whether a wait retries after the failure `s`.
inline bool wants_retry(Status s, RetryOn on) {
  if (on == RetryOn::kTransient) return traits(s.code()).retryable;
  return s.code() == ErrorCode::kBusy || s.code() == ErrorCode::kExpired;
}

/// Where the operation in flight is.
enum class OpPhase : uint8_t {
  kIdle,     ///< No request and no pause (between two, or no operation).
  kRequest,  ///< A request in flight, or its outcome kept for step().
  kPause,    ///< A backoff pause until its end.
};

/// The words of a primitive's request in flight, held by the primitive
/// (sized for its longest call: `A` arguments, `N` of them numbers): a
/// started request views them until its reply is in (a NOSCRIPT fallback
/// encodes them again).
template <size_t A, size_t N>
struct RequestWords {
  Bytes key;
  Bytes args[A];
  DecimalText num[N];
};

class ConnectionIo;

/// A routing back end's blocking eval() and command() (Sentinel,
/// Cluster): `call` (a plain command without call.script), routed by `key`
/// (any, for a back end with one primary), through the routed steps every
/// lease's request takes, driven by the one blocking driver to its end. The reply
/// lives until the serving connection's next request. Errors: as
/// Backend::eval(); kInvalidArgument also while the back end does not
/// route (before its init()) and for a key longer than kMaxKeyLen;
/// kRandomFailed.
Result<const Reply*> call_routed(Backend& backend, Bytes key, const ScriptCall& call,
                                 Deadline deadline);

/// An ownership check's outcome as owned() answers it: ok is true,
/// kNotOwner false, any other status an error.
inline Result<bool> owned_of(Status s) {
  if (s.code() == ErrorCode::kNotOwner) return false;
  if (!s.ok()) return s;
  return true;
}

class LeaseCore {
 public:
  /// Attaches to the back end's connection (a plain one) for the core's
  /// lifetime: handles sharing it then take turns (connection.h).
  explicit LeaseCore(Backend& backend);
  ~LeaseCore();
  LeaseCore(const LeaseCore&) = delete;
  LeaseCore& operator=(const LeaseCore&) = delete;

  /// Checks the key (1 .. kMaxKeyLen bytes) and the timing, seeds the
  /// jitter and keeps them. With `companions` (suffixes: ":fence", ...),
  /// also checks that each companion of the key (lock_keys.h) is at most
  /// kMaxCompanionLen bytes and that the back end can serve them with the
  /// key (Backend::check_key). The core is unchanged on error, but for
  /// last_error(), which names an argument it refused. Errors:
  /// kInvalidArgument, kRandomFailed.
  Status init(Bytes key, const LeaseTiming& timing, Span<const Bytes> companions = {});
  /// True once init() succeeded.
  bool ready() const { return key_len_ > 0; }
  /// Why the last init() refused its arguments, else the back end's last
  /// error text (never null).
  const char* last_error() const {
    return init_fault_ != 0 ? kInitFaults[init_fault_] : backend_->last_error();
  }

  Bytes key() const { return Bytes(key_, key_len_); }
  Backend& backend() const { return *backend_; }
  /// The back end's one connection when it is a plain Connection, else
  /// nullptr (Backend::direct()).
  Connection* direct() const { return backend_->direct(); }
  Clock& clock() const { return backend_->clock(); }
  Nanos command_timeout() const { return backend_->command_timeout(); }
  /// The connection serving the key (through Sentinel or Cluster, if used).
  Connection& connection() const;
  /// A well-formed reply that is not ours: Connection::reject_reply() on
  /// the serving connection (closes it). Returns kProtocol.
  Status reject(const char* what) const;
  /// One command timeout from now.
  Deadline io_deadline() const;

  /// A PTTL request's outcome `r` as a KeyStatus in *out, whoever holds
  /// the key. Errors: the request's, kProtocol (not an integer >= -2: the
  /// connection is closed).
  Status key_status_of(const Result<const Reply*>& r, KeyStatus* out) const;

  /// When a lease of `ttl` asked for at `start` stops being safe to use.
  TimePoint validity_end(TimePoint start, Millis ttl) const;
  /// After a request for `ttl` sent at `start` whose outcome is unknown:
  /// the earlier of `old_end` and what the request could have set.
  TimePoint least_end(TimePoint old_end, TimePoint start, Millis ttl) const;
  /// Time left until `valid_until` (0 once passed).
  Nanos left(TimePoint valid_until) const;
  /// A renewal's deadline: one command timeout, but no later than
  /// `valid_until` while that is ahead of `start`.
  Deadline renewal_deadline(TimePoint valid_until, TimePoint start) const;

  /// Writes `hex_len` (even, <= kMaxTokenLen) random hex characters to
  /// `out`: tokens, permit ids, owner ids. Errors: kRandomFailed.
  static Status mint(char* out, size_t hex_len) { return random_hex(out, hex_len / 2); }

  /// Counts one operation that started at `start` in the serving
  /// connection's metrics (which calls its event hook). Returns `s`.
  Status noted(EventKind kind, TimePoint start, Status s) const;
  /// A step that may have sent a request: `s` while that is kInProgress,
  /// else the operation ends with `s`, counted as `kind` from `start`.
  Status finish(EventKind kind, TimePoint start, Status s);
  /// After an attempt sent at `start` that ended with `s` (counted): a
  /// backoff pause while the wait goes on, else the operation ends with
  /// `s`.
  Status after_attempt(Status s, TimePoint start);

  /// Other handles use the same back end: a request may wait its turn on
  /// a Connection, or for its node on a Sentinel or Cluster, so none may
  /// hold a connection for long (no BLPOP).
  bool shared() const;

  /// The holder's TTL seen by the last busy attempt (0: none or no TTL).
  Millis busy_ttl() const { return busy_ttl_; }
  /// Capped at kMaxTtl: a longer TTL (Redis takes centuries) would
  /// overflow the waits computed from it.
  void set_busy_ttl(Millis ttl) { busy_ttl_ = ttl < kMaxTtl ? ttl : kMaxTtl; }
  Prng& rng() { return rng_; }
  /// The next jittered backoff delay, cut to the holder's TTL when `last`
  /// is kBusy and the holder has one (it frees by then at the latest), and
  /// to `left`.
  Nanos backoff_delay(Status last, Nanos left);

  // --- The operation in flight (src/lease/lease_op.cc): one per handle.
  /// The primitive's step(): continues the operation (LeaseCore::run()).
  using OpStep = Status (*)(void* self);
  /// A wait's next attempt once its pause is over, within `deadline`.
  using Again = Status (*)(void* self, Deadline deadline);
  /// The outcome of the request in flight (never pending).
  using OnReply = Status (*)(void* self, const Result<const Reply*>& r);
  /// The one step of every primitive: kInvalidArgument without an
  /// operation, kInProgress while its request or pause is pending, else
  /// again(self) after a pause or on_reply(self) with the request's
  /// outcome.
  Status step(Again again, OnReply on_reply, void* self);
  /// Claims the handle for operation `op` (the primitive's code, not 0).
  /// With `nonblocking` (a start_*() call) the back end must be served
  /// without blocking (steps()); the blocking calls serve every back end
  /// (on a Sentinel or Cluster by the same routed steps, driven by run();
  /// a back end that cannot route runs each request to its end in send()).
  /// Errors: kInvalidArgument (an operation in flight, or nonblocking on a
  /// back end steps() refuses).
  Status begin_op(uint8_t op, bool nonblocking);
  /// True if start_*() operations are served: a plain Connection, or a
  /// back end that routes without blocking (Backend::router(): Cluster or
  /// Sentinel once set up).
  bool steps() const { return backend_->direct() || backend_->router(); }
  /// Ends the operation; returns `s`.
  Status end_op(Status s);
  /// The operation in flight (0: none).
  uint8_t op() const { return op_; }
  OpPhase phase() const { return phase_; }

  /// Starts `call`, whose arrays (RequestWords) must live until its reply is in,
  /// within `deadline`: written at once without blocking on a plain
  /// connection (or, on a closed one, written once the connect's
  /// non-blocking steps are done). In a start_*() operation on a routing
  /// back end it goes to the node Backend::route_for() names (while it
  /// names none, Backend::route_pending() is polled as a pause), and
  /// reply() follows its redirects and pauses as states (at most
  /// kMaxRedirects);
  /// on a routed node another request occupies it ends as kConnectionBusy.
  /// A blocking operation on another back end runs it to its end here.
  /// On a connection another handle's request occupies (or, for a start_*()
  /// operation, that other handles wait for first) it waits its turn, and
  /// ends as kConnectionBusy if the turn has not come by `deadline`.
  /// Returns kInProgress: reply() has the outcome.
  Status send(const ScriptCall& call, Deadline deadline);
  /// As send() for a plain command (BLPOP, SCRIPT LOAD). Routed, it goes to
  /// the node route_for() names, or while the back end looks that up again,
  /// to the node of the request before (a SCRIPT LOAD must reach the node
  /// that lost the script); it ends with the error a redirect brings (the
  /// back end learns the slot's owner from it), with kNotConnected when
  /// there is no node yet, or with kConnectionBusy when another handle's
  /// request is on that node. A SCRIPT LOAD never finds one: it goes out in
  /// the step that read the NOSCRIPT reply, which freed the node (one
  /// request in flight per connection).
  Status send_command(Span<const Bytes> args, Deadline deadline);
  /// `first` and then `call` in one write (pipelines() only): the outcome
  /// is the call's; first_status() the command's. Routed, both go to the
  /// node route_for() names (while it names none, the call alone goes as
  /// send() sends it, `first` dropped), and a redirect or resend carries
  /// the call alone.
  Status send_pipelined(Span<const Bytes> first, const ScriptCall& call, Deadline deadline);
  /// True if send_pipelined() serves: a plain connection, or a back end
  /// that routes (Sentinel, Cluster), blocking calls included.
  bool pipelines() const { return steps(); }
  /// The outcome of the request in flight: nullptr while pending, else its
  /// reply or error (kTimeout once its deadline passed: the connection is
  /// closed). A reply lives until the connection's next request.
  Result<const Reply*> reply();
  /// The first command's outcome after send_pipelined() (ok otherwise).
  Status first_status() const { return first_; }
  /// Pauses for `d` (phase kPause) and returns kInProgress.
  Status pause(Nanos d);
  /// True once the pause is over (then phase kIdle).
  bool pause_over();

  /// What the operation waits on (Lease::wait_fds(), next_deadline()).
  size_t wait_fds(pollfd* out, size_t cap) const;
  Deadline next_deadline() const;
  /// A blocking call: the one driver (src/connection/machine.h) over this
  /// core's wait and `step`.
  /// Returns the final status.
  Status run(Status s, OpStep step, void* self);
  /// Lease::cancel(): the request in flight ends as kTimeout (the
  /// connection closed), a pause ends, and step(self) is run to the end
  /// with no new request sent (each ends as kTimeout) and no new wait.
  void cancel(OpStep step, void* self);

  /// A wait of `wait` from now (negative or kForever: no end) for the
  /// operation's attempts, retrying the failures `on` names; the first
  /// attempt's deadline is the caller's.
  void begin_wait(Nanos wait, RetryOn on = RetryOn::kTransient);
  /// After an attempt that ended with `s`: true if the wait goes on, with
  /// the time left of it in *left (> 0).
  bool wait_on(Status s, Nanos* left);
  /// A retry's deadline: one command timeout, cut at attempts_until().
  Deadline attempt_deadline() const;
  /// The wait's end plus one command timeout (the last round trip's
  /// budget): no attempt outlives it.
  Deadline attempts_until() const { return attempts_until_; }
  /// Time left of the wait (0 once over).
  Nanos wait_left() const { return wait_until_.remaining(clock()); }

  /// The routed steps (src/lease/lease_route.cc), for Backend::router().
  static const LeaseRouter kRouter;

 private:
  static constexpr const char* kInitFaults[] = {
      "", "init(): the key is empty",
      "init(): the key is longer than kMaxKeyLen bytes (edgelock/config.h)",
      "init(): ttl, drift_factor or the retry times are out of range (edgelock/limits.h)"};
  void complete(Result<const Reply*> r);
  bool begin_request(Deadline deadline);
  Status started(Status s);
  Status take_turn(ConnectionIo& io);
  void leave_queue();
  void await();
  Status start_route();
  Status start_route_command(Span<const Bytes> args, Deadline deadline);
  Status start_routed(Connection* node, bool asking);
  Status wait_node(Connection* node);
  Status start_route_pipelined(Span<const Bytes> first);
  Result<const Reply*> reroute(Status s);
  Result<const Reply*> resend();
  Result<const Reply*> resend_due();
  Result<const Reply*> outcome();

  // How often a request waiting for its connection (another handle's
  // request on it) looks again: that handle frees it in its own step(),
  // which no fd of ours can announce.
  static constexpr Nanos kTurnPoll = Millis(1);

  // Small fields first: short offsets, shorter code on Thumb-2.
  Backend* backend_;
  uint8_t op_ = 0;
  OpPhase phase_ = OpPhase::kIdle;
  bool done_ = false;         // the request's outcome is in result_
  bool pipelined_ = false;    // send_pipelined(): two replies due
  bool cancelling_ = false;   // cancel(): nothing new starts
  bool waiting_ = false;      // begin_wait(): failed attempts may be retried
  bool nonblocking_ = false;  // a start_*() operation: takes its turn in order on a Connection
  bool queued_ = false;       // send() waits its turn on a shared connection
  bool confirming_ = false;   // a routed write's WAIT is out (Backend::start_confirm())
  bool plain_ = false;        // a routed plain command: never sent again
  bool asked_ = false;        // the routed request went with ASKING
  bool resending_ = false;    // a routed request waits until resend_at_ to go again
  uint8_t redirects_ = 0;     // redirects the routed request followed
  uint8_t init_fault_ = 0;    // why the last init() failed (kInitFaults), 0: it did not
  Status first_;
  uint16_t key_len_ = 0;  // kMaxKeyLen <= 4096 (check_config.h)
  // Which failures the wait retries (begin_wait()).
  RetryOn retry_on_ = RetryOn::kTransient;
  uint32_t attempts_ = 0;
  Result<const Reply*> result_{nullptr};
  ScriptCall turn_call_;                         // what send() starts when its turn comes
  Connection* conn_ = nullptr;                   // the connection of the request in flight
  const LeaseRouter* router_ = nullptr;          // a routed request's steps (Backend::router())
  Deadline deadline_ = Deadline::never();        // the request's, or the pause's end
  Deadline resend_at_ = Deadline::never();       // a routed request's pause end (TRYAGAIN)
  Deadline wait_until_ = Deadline::never();      // the wait's end
  Deadline attempts_until_ = Deadline::never();  // the wait's end + one command timeout
  Millis busy_ttl_{0};
  double drift_factor_ = 0.01;
  Prng rng_;
  Backoff backoff_{Millis(2), Millis(250)};
  uint8_t key_[kMaxKeyLen] = {};
};

/// A request routed by its back end (Sentinel, Cluster) takes these steps
/// instead of a plain connection's: started, rerouted after an error, sent
/// again after a pause.
struct LeaseRouter {
  Status (LeaseCore::*start)();
  Status (LeaseCore::*start_pipelined)(Span<const Bytes> first);
  Status (LeaseCore::*start_command)(Span<const Bytes> args, Deadline deadline);
  Result<const Reply*> (LeaseCore::*reroute)(Status s);
  Result<const Reply*> (LeaseCore::*resend_due)();
};

}  // namespace detail
}  // namespace edgelock
