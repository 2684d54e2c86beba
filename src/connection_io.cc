// Connection I/O: encoding into the fixed tx buffer, non-blocking progress,
// and the poll() wait that honours one deadline per operation.
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "error_text.h"
#include "edgelock/connection.h"
#include "eval_capacity.h"  // the build fails if the longest EVAL cannot fit tx_
#include "resp/encoder.h"
#include "transport/transport.h"

namespace edgelock {

namespace {
// Upper bound on poll rounds of one command: each round either moves bytes
// or waits on the deadline, so this only guards against a misbehaving peer.
constexpr int kMaxRounds = 1 << 20;
}  // namespace

Status Connection::encode(Span<const Bytes> args, size_t offset) {
  ByteBuilder out(tx_ + offset, sizeof tx_ - offset);
  const resp::Command command{args.data(), args.size()};
  const Status s = resp::encode_command(out, command);
  if (!s.ok()) {
    set_error(error_, "command of %zu bytes does not fit the %zu-byte buffer",
                  resp::encoded_length(command), sizeof tx_ - offset);
    return s;
  }
  tx_len_ = offset + out.size();
  return Status();
}

Status Connection::encode_eval(bool by_sha, size_t offset) {
  eval_by_sha_ = by_sha;
  if (!eval_.script) {
    set_error(error_, "eval without a script");
    return ErrorCode::kInvalidArgument;
  }
  // EVALSHA sha numkeys key... arg...; at most 3 + keys + args arguments.
  constexpr size_t kMaxArgs = 16;
  if (eval_.keys.size() + eval_.args.size() + 3 > kMaxArgs) {
    set_error(error_, "EVAL with more than %zu keys and arguments", kMaxArgs - 3);
    return ErrorCode::kInvalidArgument;
  }
  Bytes argv[kMaxArgs];
  char numkeys[8];
  const int n = std::snprintf(numkeys, sizeof numkeys, "%zu", eval_.keys.size());
  const Script& script = *eval_.script;
  size_t c = 0;
  argv[c++] = Bytes::from_cstr(by_sha ? "EVALSHA" : "EVAL");
  argv[c++] = by_sha ? Bytes(script.sha1, 40) : Bytes(script.body, script.len);
  argv[c++] = Bytes(numkeys, static_cast<size_t>(n));
  for (const Bytes& key : eval_.keys) argv[c++] = key;
  for (const Bytes& arg : eval_.args) argv[c++] = arg;
  return encode(Span<const Bytes>(argv, c), offset);
}

Status Connection::begin() {
  transport_.parser.release();  // the previous command's replies end here
  tx_sent_ = 0;
  replies_due_ = 1;
  phase_ = Phase::kSending;
  ++stats_.commands;
  return Status();
}

void Connection::drop_if_stale() {
  if (!is_connected() || !detail::transport_stale_input(transport_)) return;
  set_error(error_, "idle connection had unexpected input or was closed; reconnecting");
  fail(ErrorCode::kProtocol).ignore();
}

Status Connection::reject_reply(const char* what) {
  set_error(error_, "unexpected reply type: %s", what);
  return fail(ErrorCode::kProtocol);
}

Status Connection::start_command(Span<const Bytes> args, Deadline deadline) {
  if (busy()) return ErrorCode::kInvalidArgument;
  drop_if_stale();
  EDGELOCK_TRY(ensure_connected(deadline));
  eval_ = ScriptCall();
  EDGELOCK_TRY(encode(args));
  return begin();
}

Status Connection::start_eval(const ScriptCall& call, Deadline deadline) {
  if (busy()) return ErrorCode::kInvalidArgument;
  drop_if_stale();
  EDGELOCK_TRY(ensure_connected(deadline));
  set_eval(call);
  EDGELOCK_TRY(encode_eval(true));
  return begin();
}

short Connection::poll_events() const {
  const short base = phase_ == Phase::kSending ? POLLOUT : POLLIN;
  return static_cast<short>(base | transport_.want_events);
}

bool Connection::has_pending_input() const {
  return detail::transport_has_pending_input(transport_);
}

Result<const Reply*> Connection::on_reply(const Reply* reply) {
  if (reply->type != ReplyType::kError) {
    phase_ = Phase::kIdle;
    return reply;
  }
  const bool noscript = reply->len >= 8 && std::memcmp(reply->str, "NOSCRIPT", 8) == 0;
  if (noscript && eval_.script && eval_by_sha_) {
    // The server lost its script cache: send the body once, which reloads it.
    // Only once: an EVAL answered with NOSCRIPT is an error, not a loop.
    const Status s = encode_eval(false);
    if (!s.ok()) {
      // Nothing is in flight (NOSCRIPT was the last reply due): the call
      // fails, the connection stays usable. Built-in scripts always fit
      // (eval_capacity.h); a caller's own script may not.
      phase_ = Phase::kIdle;
      return s;
    }
    EDGELOCK_TRY(begin());
    return static_cast<const Reply*>(nullptr);
  }
  phase_ = Phase::kIdle;
  set_error(error_, "%.*s", static_cast<int>(reply->len), reply->str);
  return classify_error_reply(reply->str, reply->len);
}

Result<const Reply*> Connection::advance() {
  if (phase_ == Phase::kIdle) return ErrorCode::kInvalidArgument;
  if (phase_ == Phase::kSending) {
    const Result<size_t> w = detail::transport_write(transport_, tx_ + tx_sent_, tx_len_ - tx_sent_, error_);
    if (!w.ok()) return fail(w.status());
    tx_sent_ += w.value();
    if (tx_sent_ < tx_len_) return static_cast<const Reply*>(nullptr);
    phase_ = Phase::kReceiving;
    // The reply is a round trip away: a recv() now would almost always
    // return EAGAIN. Going straight to poll() saves that syscall (3 per
    // command instead of ~4; see docs/benchmarks.md).
    return static_cast<const Reply*>(nullptr);
  }
  for (int i = 0; i < 4; ++i) {
    const Result<const Reply*> r = detail::transport_next_reply(transport_, error_);
    if (!r.ok()) return fail(r.status());
    if (r.value()) {
      // One command in flight (or the last of a pipeline), so one reply:
      // anything more is unsolicited and a sign we may be reading someone
      // else's answer.
      if (replies_due_ == 1 && detail::transport_unread(transport_) > 0) {
        set_error(error_, "server sent more than one reply");
        return fail(ErrorCode::kProtocol);
      }
      return on_reply(r.value());
    }
    const Result<size_t> n = detail::transport_read(transport_, error_);
    if (!n.ok()) return fail(n.status());
    if (n.value() == 0) break;
  }
  return static_cast<const Reply*>(nullptr);
}

Status Connection::abandon() {
  set_error(error_, "no reply within the deadline");
  fail(ErrorCode::kTimeout).ignore();
  return ErrorCode::kTimeout;
}

Result<const Reply*> Connection::wait(Deadline deadline) {
  bool may_block = true;
  for (int round = 0; round < kMaxRounds; ++round) {
    const Result<const Reply*> r = advance();
    if (!r.ok() || r.value()) return r;
    if (deadline.expired(*clock_)) return abandon();
    // Decrypted TLS bytes wait in mbedTLS, where poll() cannot see them.
    if (detail::transport_has_pending_input(transport_)) continue;
    // Waiting for the reply in recv() itself saves the poll() syscall. Only
    // with a slice's worth of deadline left, and once a slice passes empty
    // the rest of the wait is poll()'s (an injected clock may not move).
    if (may_block && phase_ == Phase::kReceiving &&
        deadline.remaining(*clock_) >= detail::kBlockingReadSlice + detail::kBlockingReadMargin) {
      const Result<size_t> n = detail::transport_read_blocking(transport_, error_);
      if (!n.ok()) return fail(n.status());
      may_block = n.value() > 0;
      continue;
    }
    pollfd p{transport_.fd, poll_events(), 0};
    const int rc = poll(&p, 1, deadline.poll_timeout_ms(*clock_));
    if (rc == 0) return abandon();
    if (rc < 0 && errno != EINTR) {
      set_error(error_, "poll: %s", std::strerror(errno));
      return fail(ErrorCode::kIo);
    }
  }
  return abandon();
}

}  // namespace edgelock
