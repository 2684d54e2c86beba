// What the C++ snippets of README.md and docs/*.md may use without
// declaring it: the library, the chrono literals, and stand-ins for the
// application's own objects (a device, a file descriptor, a log call).
// check_snippets.py compiles each snippet after this, inside a function
// body, with the project's warning flags and -Werror. A snippet that
// declares a name itself (Connection conn; Lock lock(conn);) hides the
// stand-in.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

using namespace edgelock;              // NOLINT: as the snippets are written
using namespace std::chrono_literals;  // NOLINT

namespace doc_snippets {

struct Device {
  bool write(const char*, uint64_t) { return true; }
};

inline Connection conn;
inline Lock lock(conn);
inline const Bytes key = Bytes::from_cstr("doc-key");
inline int my_fd = 0;
inline pollfd fds[4] = {};
inline nfds_t n = 0;
inline const uint8_t pin[32] = {};
inline Device device;
inline const char data[] = "payload";
inline const size_t len = sizeof data;

inline void modem_write(uint64_t, const char*, size_t) {}
inline void helper() {}
inline void download() {}
inline void power_cycle() {}
__attribute__((format(printf, 1, 2))) inline void log(const char*, ...) {}

}  // namespace doc_snippets

using namespace doc_snippets;  // NOLINT
