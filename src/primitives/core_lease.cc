// CoreLease and TokenLease: the step, release, extend and hand-back every
// single-key lease runs (edgelock/detail/core_lease.h).
#include "edgelock/detail/core_lease.h"

#include <cstring>

#include "edgelock/metrics.h"
#include "edgelock/reply.h"
#include "primitives/lock_scripts.h"

namespace edgelock {
namespace detail {

namespace {
constexpr size_t kTokenLen = 32;  // 128 random bits as hex
static_assert(kMaxTokenLen <= UINT8_MAX, "a lease keeps its token's length in a uint8_t");
}  // namespace

Status CoreLease::step() { return core_.step(&again_of, &reply_of, this); }

Millis CoreLease::lease_ttl() const { return Millis(0); }
Status CoreLease::attempt_again(Deadline) { return ErrorCode::kInvalidArgument; }
Status CoreLease::on_reply(const Result<const Reply*>&) { return ErrorCode::kInvalidArgument; }
Status CoreLease::attempt_done(Status) { return ErrorCode::kInvalidArgument; }
Status CoreLease::release_request(bool) { return ErrorCode::kInvalidArgument; }
Status CoreLease::extend_request(Millis, ExtendMode) { return ErrorCode::kInvalidArgument; }
Status CoreLease::on_extend(const Result<const Reply*>&) { return ErrorCode::kInvalidArgument; }
Status CoreLease::on_query(const Result<const Reply*>&) { return ErrorCode::kInvalidArgument; }

Status CoreLease::again_of(void* self, Deadline deadline) {
  return static_cast<CoreLease*>(self)->attempt_again(deadline);
}

// An extend's and a query's reply end the operation here; every other is
// the lease's to handle. A status query is not counted: it claims nothing.
Status CoreLease::reply_of(void* self, const Result<const Reply*>& r) {
  CoreLease& l = *static_cast<CoreLease*>(self);
  switch (l.core_.op()) {
    case kOpExtend: return l.core_.finish(EventKind::kExtend, l.op_t0_, l.on_extend(r));
    case kOpCheck: return l.core_.finish(EventKind::kCheck, l.op_t0_, l.on_query(r));
    case kOpStatus: return l.core_.end_op(l.on_query(r));
    default: return l.on_reply(r);
  }
}

Status CoreLease::begin_release(bool nonblocking) {
  EDGELOCK_TRY(core_.begin_op(kOpRelease, nonblocking));
  op_t0_ = clock().now();
  return core_.finish(EventKind::kRelease, op_t0_, release_request(false));
}

Status CoreLease::begin_extend(Millis ttl, ExtendMode mode, bool nonblocking) {
  EDGELOCK_TRY(core_.begin_op(kOpExtend, nonblocking));
  op_t0_ = clock().now();
  return core_.finish(EventKind::kExtend, op_t0_, extend_request(ttl, mode));
}

Status CoreLease::hand_back(Status then) {
  last_ = then;
  op_t0_ = clock().now();
  const Status s = release_request(true);
  if (s.code() == ErrorCode::kInProgress) return s;
  core_.noted(EventKind::kRelease, op_t0_, s).ignore();
  return attempt_done(then);
}

// --- TokenLease.

Status TokenLease::init_lease(Bytes key, const LeaseTiming& timing, Span<const Bytes> companions) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  // The core checks the key and that the back end serves its companions
  // with it (every companion shares the key's slot: lock_keys.h).
  EDGELOCK_TRY(core_.init(key, timing, companions));
  forget();
  return Status();
}

void TokenLease::forget() {
  has_token_ = false;
  retired_ = false;
  granted_ = false;
  valid_until_ = TimePoint();
  fence_ = 0;
}

Status TokenLease::new_token() {
  forget();
  EDGELOCK_TRY(core_.mint(token_, kTokenLen));
  token_len_ = kTokenLen;
  return Status();
}

// Retries keep the token (the script recognises a grant whose reply was
// lost), except after a hand-back of unknown outcome: that delete may
// still land and must find no grant under its token (the old lease, if
// the hand-back never lands, lapses by its TTL).
Status TokenLease::begin_attempt() {
  if (retired_) EDGELOCK_TRY(new_token());
  auto& w = words_;
  w.key = key();
  w.num[0].set(lease_ttl().count());
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  // From here a lost reply may mean the key is ours (also on a retry after
  // a late grant was handed back): keep the token so release() can clean up.
  has_token_ = true;
  // Validity counts from before the request leaves (before a BLPOP, if
  // any): the server's TTL may have started any time after this.
  req_start_ = clock().now();
  return Status();
}

Status TokenLease::extend_request(Millis ttl, ExtendMode mode) {
  if (ttl < Millis(1) || ttl > kMaxTtl) return ErrorCode::kInvalidArgument;
  if (!has_token_ || retired_) return ErrorCode::kNotHeld;
  auto& w = words_;
  w.num[0].set(ttl.count());
  w.key = key();
  w.args[0] = token();
  w.args[1] = w.num[0].bytes();
  w.args[2] = Bytes::from_cstr(mode == ExtendMode::kAdd ? "add" : "set");
  ext_ttl_ = ttl;
  req_start_ = clock().now();
  // A renewal never waits past the lease it renews: at its end the caller
  // must learn of the loss (e.g. to stop the work it guards).
  const Deadline d = core_.renewal_deadline(granted_ ? valid_until_ : TimePoint(), req_start_);
  return core_.send({&kExtendScript, {&w.key, 1}, {w.args, 3}, true}, d);
}

Status TokenLease::on_extend(const Result<const Reply*>& r) {
  const Reply* rep = r.ok() ? r.value() : nullptr;
  const bool answer = rep && rep->type == ReplyType::kInteger && rep->integer >= 0;
  if (!answer) {
    const Status s = r.ok() ? core_.reject("extend wants a TTL or 0") : r.status();
    // The new TTL may have been applied (timeout, lost reply, WAIT short
    // of its replicas), or not: the lease lasts until the earlier end.
    if (granted_) valid_until_ = core_.least_end(valid_until_, req_start_, ext_ttl_);
    return s;
  }
  if (rep->integer == 0) {
    forget();
    return ErrorCode::kNotOwner;
  }
  granted_ = true;
  // kAdd stacks TTLs without bound on the server; claiming less is safe.
  const Millis ttl = Millis(rep->integer) < 2 * kMaxTtl ? Millis(rep->integer) : 2 * kMaxTtl;
  valid_until_ = core_.validity_end(req_start_, ttl);
  // ok means usable: a TTL the round trip and drift eat is not (token kept).
  if (remaining() <= Nanos::zero()) return ErrorCode::kExpired;
  return Status();
}

Result<bool> TokenLease::owned() { return owned_of(drive(begin_check(false))); }

Status TokenLease::begin_check(bool nonblocking) {
  if (!has_token_) return ErrorCode::kNotHeld;
  EDGELOCK_TRY(core_.begin_op(kOpCheck, nonblocking));
  op_t0_ = clock().now();
  auto& w = words_;
  w.key = key();
  w.args[0] = token();
  const Status s = core_.send({&kOwnedScript, {&w.key, 1}, {w.args, 1}}, core_.io_deadline());
  return core_.finish(EventKind::kCheck, op_t0_, s);
}

Result<KeyStatus> TokenLease::status() {
  KeyStatus ks;
  EDGELOCK_TRY(drive(begin_status(&ks, false)));
  return ks;
}

// A plain PTTL: its words live in words_ until the reply is in, so a
// routed one follows redirects as a script call does.
Status TokenLease::begin_status(KeyStatus* out, bool nonblocking) {
  if (!core_.ready() || !out) return ErrorCode::kInvalidArgument;
  EDGELOCK_TRY(core_.begin_op(kOpStatus, nonblocking));
  status_out_ = out;
  auto& w = words_;
  w.args[0] = Bytes::from_cstr("PTTL");
  w.args[1] = key();
  return core_.send({nullptr, {}, {w.args, 2}}, core_.io_deadline());
}

// kOwnedScript answers the key's PTTL (>= -1) while it holds our token,
// -3 when it does not.
Status TokenLease::on_query(const Result<const Reply*>& r) {
  if (core_.op() == kOpStatus) return core_.key_status_of(r, status_out_);
  if (!r.ok()) return r.status();
  const Reply* rep = r.value();
  if (rep->type != ReplyType::kInteger || (rep->integer < -1 && rep->integer != -3)) {
    return core_.reject("owned wants a PTTL or -3");
  }
  if (rep->integer != -3) return Status();
  forget();
  return ErrorCode::kNotOwner;
}

Status TokenLease::adopt(Bytes token) {
  if (core_.op() != 0) return ErrorCode::kInvalidArgument;
  if (token.size == 0 || token.size > kMaxTokenLen) return ErrorCode::kInvalidArgument;
  forget();
  std::memcpy(token_, token.data, token.size);
  token_len_ = static_cast<uint8_t>(token.size);
  has_token_ = true;
  return Status();
}

}  // namespace detail
}  // namespace edgelock
