#include "edgelock/lock_guard.h"

#include <cstdio>

namespace edgelock {

void default_release_error_handler(Status status, const char* detail, void*) {
  std::fprintf(stderr, "edgelock: release on scope exit failed: %s (%s)\n", status.to_string(),
               detail ? detail : "");
}

LockGuard::~LockGuard() {
  if (!lease_) return;
  const Status s = lease_->release();
  if (!s.ok() && s.code() != ErrorCode::kNotHeld && on_error_) {
    on_error_(s, lease_->last_error(), context_);
  }
}

Status LockGuard::release() {
  Lease* l = lease_;
  lease_ = nullptr;
  return l ? l->release() : Status(ErrorCode::kNotHeld);
}

}  // namespace edgelock
