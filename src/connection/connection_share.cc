// Connection: handles that share it. The connection carries one request
// at a time; a handle whose start finds it occupied waits its turn in a
// fixed queue, oldest first, so a keeper's renewal is not starved by a
// neighbour's retries.
#include "base/error_text.h"
#include "edgelock/connection.h"

namespace edgelock {

bool Connection::turn_of(const void* owner, bool in_order) const {
  if (busy()) return false;
  return !in_order || turns_n_ == 0 || turns_[0] == owner;
}

Status Connection::queue_turn(const void* owner) {
  for (uint8_t i = 0; i < turns_n_; ++i) {
    if (turns_[i] == owner) return Status();
  }
  if (turns_n_ >= kMaxQueuedHandles) {
    set_error(error_,
              "connection busy: %u handles already wait for it (Meson option max_queued_handles)",
              static_cast<unsigned>(turns_n_));
    return ErrorCode::kConnectionBusy;
  }
  turns_[turns_n_++] = owner;
  return Status();
}

void Connection::leave_queue(const void* owner) {
  uint8_t j = 0;
  for (uint8_t i = 0; i < turns_n_; ++i) {
    if (turns_[i] != owner) turns_[j++] = turns_[i];
  }
  turns_n_ = j;
}

Status Connection::refuse_busy(const char* why) {
  set_error(error_, "connection busy: %s", why);
  return ErrorCode::kConnectionBusy;
}

}  // namespace edgelock
