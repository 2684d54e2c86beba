#pragma once
// Writing the fixed error text (private). Truncation of a long host name or
// server message is acceptable here: the text is for people, the code is
// what programs act on.

#include <cstdarg>
#include <cstddef>
#include <cstdio>

#include "edgelock/limits.h"

namespace edgelock {

__attribute__((format(printf, 2, 3))) inline void set_error(char (&buf)[kErrorTextSize],
                                                            const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
}

}  // namespace edgelock
