#pragma once
/// @file lock_guard.h
/// RAII: releases a held lock when the scope ends. A destructor cannot
/// return a status, so a failed release is never dropped silently: it goes
/// to the error handler (default: one line on stderr), and release() can be
/// called explicitly to get the Status.

#include "edgelock/status.h"

namespace edgelock {

/// Called when the guard's destructor could not release. `context` is the
/// pointer given to the guard.
using ReleaseErrorHandler = void (*)(Status status, const char* detail, void* context);

/// Writes "edgelock: release of KEY failed: ..." to stderr.
void default_release_error_handler(Status status, const char* detail, void* context);

/// Works with any lock type offering release(), held() and key() (Lock,
/// QuorumLock).
template <typename LockT>
class LockGuard {
 public:
  /// Adopts a lock the caller has acquired.
  explicit LockGuard(LockT& lock, ReleaseErrorHandler on_error = default_release_error_handler,
                     void* context = nullptr)
      : lock_(&lock), on_error_(on_error), context_(context) {}
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

  ~LockGuard() {
    if (!lock_) return;
    const Status s = lock_->release();
    if (!s.ok() && s.code() != ErrorCode::kNotHeld && on_error_) {
      on_error_(s, lock_->connection_error(), context_);
    }
  }

  /// Releases now and reports the outcome; the destructor then does nothing.
  /// Errors: as the lock's release().
  Status release() {
    LockT* l = lock_;
    lock_ = nullptr;
    return l ? l->release() : Status(ErrorCode::kNotHeld);
  }
  /// Stops guarding without releasing (e.g. handing the lease to a keeper).
  void dismiss() { lock_ = nullptr; }

 private:
  LockT* lock_;
  ReleaseErrorHandler on_error_;
  void* context_;
};

}  // namespace edgelock
