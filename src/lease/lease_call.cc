// detail::call_routed(): a routing back end's blocking eval() and
// command() as one request of a lease core of its own, driven by the one
// blocking driver (Sentinel and Cluster only: built with either).
#include "edgelock/detail/lease_core.h"

namespace edgelock {
namespace detail {

namespace {

struct RoutedCall {
  explicit RoutedCall(Backend& backend) : core(backend) {}
  LeaseCore core;
  Result<const Reply*> out{nullptr};
};

// One call never pauses between attempts: there is no second one.
Status no_attempt(void*, Deadline) { return ErrorCode::kInvalidArgument; }

Status keep_reply(void* self, const Result<const Reply*>& r) {
  RoutedCall& c = *static_cast<RoutedCall*>(self);
  c.out = r;
  return c.core.end_op(r.status());
}

Status step_call(void* self) {
  return static_cast<RoutedCall*>(self)->core.step(&no_attempt, &keep_reply, self);
}

}  // namespace

Result<const Reply*> call_routed(Backend& backend, Bytes key, const ScriptCall& call,
                                 Deadline deadline) {
  RoutedCall c(backend);
  // Not routing yet, send() would call the back end's blocking eval(): this.
  if (!c.core.steps()) return Status(ErrorCode::kInvalidArgument);
  EDGELOCK_TRY(c.core.init(key.size > 0 ? key : Bytes::from_cstr("-"), LeaseTiming{}));
  EDGELOCK_TRY(c.core.begin_op(1, false));
  EDGELOCK_TRY(c.core.run(c.core.send(call, deadline), &step_call, &c));
  return c.out;
}

}  // namespace detail
}  // namespace edgelock
