#include "backends/replica_wait.h"

#include "base/duration.h"
#include "base/error_text.h"
#include "edgelock/bytes.h"

namespace edgelock {
namespace detail {

Status wait_for_replicas(Connection& conn, int want, Nanos max_wait, Deadline deadline,
                         char (&err)[kErrorTextSize]) {
  Nanos budget = deadline.remaining(conn.clock()) / 2;
  if (budget > max_wait) budget = max_wait;
  // Rounded down: WAIT gives up before the budget does (at least 1 ms).
  const Millis wait = std::chrono::floor<Millis>(budget);
  const long long ms = detail::ms_arg(wait > Millis(0) ? wait : Millis(1));
  const DecimalText n_text(want);
  const DecimalText ms_text(ms);
  const Bytes args[3] = {Bytes::from_cstr("WAIT"), n_text.bytes(), ms_text.bytes()};
  const Result<const Reply*> r = conn.command(args, deadline);
  if (!r.ok()) {
    set_error(err, "%s", conn.last_error());
    return r.status();
  }
  if (r.value()->type != ReplyType::kInteger) {
    set_error(err, "WAIT: unexpected reply type");
    return ErrorCode::kProtocol;
  }
  if (r.value()->integer < want) {
    set_error(err, "WAIT: %lld of %d replicas acknowledged within %lld ms",
              static_cast<long long>(r.value()->integer), want, ms);
    return ErrorCode::kNoQuorum;
  }
  return Status();
}

namespace {

// A positive integer, or an array that starts with one.
bool is_grant(const Reply* r) {
  if (r->type == ReplyType::kArray) r = r->count > 0 ? &r->elements[0] : nullptr;
  return r && r->type == ReplyType::kInteger && r->integer > 0;
}

}  // namespace

Result<const Reply*> confirm_write(Connection& conn, const Reply* reply, int want, Nanos max_wait,
                                   Deadline deadline, Reply (&keep)[4],
                                   char (&err)[kErrorTextSize]) {
  if (want == 0 || !is_grant(reply)) return reply;
  keep[0] = *reply;
  if (reply->type == ReplyType::kArray) {
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
  }
  const Status s = wait_for_replicas(conn, want, max_wait, deadline, err);
  if (!s.ok()) return s;
  return static_cast<const Reply*>(&keep[0]);
}

}  // namespace detail
}  // namespace edgelock
