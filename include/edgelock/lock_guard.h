#pragma once
/// @file lock_guard.h
/// RAII: releases a held lease (Lock, QuorumLock, ReentrantLock level,
/// Permit: any Lease) when the scope ends. A destructor cannot return a
/// status, so a failed release is never dropped silently: it goes to the
/// error handler (default: one line on stderr), and release() can be
/// called explicitly to get the Status.

#include "edgelock/lease.h"
#include "edgelock/status.h"

namespace edgelock {

/// Called when the guard's destructor could not release. `detail` is the
/// lease's last_error() text, `context` the pointer given to the guard.
using ReleaseErrorHandler = void (*)(Status status, const char* detail, void* context);

/// Writes "edgelock: release on scope exit failed: <status> (<detail>)" to
/// stderr.
void default_release_error_handler(Status status, const char* detail, void* context);

class LockGuard {
 public:
  /// Adopts a lease the caller has acquired; it must outlive the guard.
  explicit LockGuard(Lease& lease, ReleaseErrorHandler on_error = default_release_error_handler,
                     void* context = nullptr)
      : lease_(&lease), on_error_(on_error), context_(context) {}
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;
  /// Releases; a failure other than kNotHeld goes to the handler.
  ~LockGuard() {
    if (!lease_) return;
    const Status s = lease_->release();
    if (!s.ok() && s.code() != ErrorCode::kNotHeld && on_error_) {
      on_error_(s, lease_->last_error(), context_);
    }
  }

  /// Releases now and reports the outcome; the destructor then does nothing.
  /// Errors: as the lease's release(); kNotHeld after release() or dismiss().
  Status release() {
    Lease* l = lease_;
    lease_ = nullptr;
    return l ? l->release() : Status(ErrorCode::kNotHeld);
  }
  /// Stops guarding without releasing (e.g. handing the lease to a keeper).
  void dismiss() { lease_ = nullptr; }

 private:
  Lease* lease_;
  ReleaseErrorHandler on_error_;
  void* context_;
};

}  // namespace edgelock
