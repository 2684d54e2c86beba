#include "backends/replica_wait.h"

#include "base/duration.h"
#include "base/error_text.h"
#include "edgelock/bytes.h"
#include "edgelock/detail/connection_io.h"

namespace edgelock {
namespace detail {

namespace {

// A positive integer, or an array that starts with one.
bool is_grant(const Reply* r) {
  if (r->type == ReplyType::kArray) r = r->count > 0 ? &r->elements[0] : nullptr;
  return r && r->type == ReplyType::kInteger && r->integer > 0;
}

// Copies the grant `reply` to keep[] (WAIT's reply replaces it in the
// arena). Errors: kProtocol (too long, or not all integers: fail closed).
Status keep_grant(const Reply* reply, Reply (&keep)[4], char (&err)[kErrorTextSize]) {
  keep[0] = *reply;
  if (reply->type != ReplyType::kArray) return Status();
  if (reply->count > 3) {
    set_error(err, "a grant of %zu elements is too long to keep for WAIT", reply->count);
    return ErrorCode::kProtocol;
  }
  for (size_t i = 0; i < reply->count; ++i) {
    if (reply->elements[i].type != ReplyType::kInteger) {
      set_error(err, "a grant with a non-integer element");
      return ErrorCode::kProtocol;
    }
    keep[1 + i] = reply->elements[i];
  }
  keep[0].elements = &keep[1];
  return Status();
}

// Starts `WAIT want timeout` on `conn`; the timeout is `max_wait` cut to
// half of what is left of `deadline`, so the reply arrives in time.
Status start_wait(Connection& conn, int want, Nanos max_wait, Deadline deadline, Millis* sent) {
  Nanos budget = deadline.remaining(conn.clock()) / 2;
  if (budget > max_wait) budget = max_wait;
  // Rounded down: WAIT gives up before the budget does (at least 1 ms).
  const Millis wait = std::chrono::floor<Millis>(budget);
  *sent = wait > Millis(0) ? wait : Millis(1);
  const DecimalText n_text(want);
  const DecimalText ms_text(detail::ms_arg(*sent));
  // Written whole when it starts: its words may live here.
  const Bytes args[3] = {Bytes::from_cstr("WAIT"), n_text.bytes(), ms_text.bytes()};
  return io(conn).start_command(args, deadline);
}

}  // namespace

Result<const Reply*> WriteConfirm::start(Connection& conn, const Reply* reply, Deadline deadline) {
  if (want == 0 || !is_grant(reply)) return reply;
  EDGELOCK_TRY(keep_grant(reply, keep, err));
  const Status s = start_wait(conn, want, max_wait, deadline, &sent);
  if (!s.ok()) {
    set_error(err, "%s", conn.last_error());
    return s;
  }
  return static_cast<const Reply*>(nullptr);
}

Result<const Reply*> WriteConfirm::end(Connection& conn, const Result<const Reply*>& wait) {
  if (!wait.ok()) {
    set_error(err, "WAIT: %s", conn.last_error());
    if (!traits(wait.status().code()).server_rejected) return wait.status();
    // Refused (a primary just demoted, an ACL): the grant landed unconfirmed.
    ++failures;
    return ErrorCode::kNoQuorum;
  }
  if (wait.value()->type != ReplyType::kInteger) {
    set_error(err, "WAIT: unexpected reply type");
    return ErrorCode::kProtocol;
  }
  if (wait.value()->integer < want) {
    ++failures;
    set_error(err, "WAIT: %lld of %d replicas acknowledged within %lld ms",
              static_cast<long long>(wait.value()->integer), want, detail::ms_arg(sent));
    return ErrorCode::kNoQuorum;
  }
  return &keep[0];
}

}  // namespace detail
}  // namespace edgelock
