#include "edgelock/lock_guard.h"

#include <cstdio>

namespace edgelock {

void default_release_error_handler(Status status, const char* detail, void*) {
  std::fprintf(stderr, "edgelock: release on scope exit failed: %s (%s)\n", status.to_string(),
               detail ? detail : "");
}

}  // namespace edgelock
