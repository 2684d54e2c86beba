// detail::run_machine(): the library's one blocking driver.
#include "connection/machine.h"

namespace edgelock {
namespace detail {

namespace {

// Each turn moves bytes, waits or ends a pause; the count only guards
// against a misbehaving peer.
constexpr int kMaxTurns = 1 << 20;

}  // namespace

Status run_machine(Status s, const Machine& m) {
  for (int turn = 0; turn < kMaxTurns && s.code() == ErrorCode::kInProgress; ++turn) {
    m.await(m.self);
    s = m.step(m.self);
  }
  if (s.code() != ErrorCode::kInProgress) return s;
  m.cancel(m.self);
  return ErrorCode::kTimeout;
}

}  // namespace detail
}  // namespace edgelock
