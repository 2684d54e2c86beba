#pragma once
// Loud failure of the simulator itself (not of the library under test): a
// request or script the model does not know. The run stops with the reason,
// since a silently wrong model would hide bugs.

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace edgelock {
namespace sim {

[[noreturn]] inline void model_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
[[noreturn]] inline void model_fail(const char* fmt, ...) {
  std::fputs("SIMULATOR MODEL FAILURE: ", stderr);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputs("\n", stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace sim
}  // namespace edgelock
