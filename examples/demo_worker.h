#pragma once
// One worker of the contention demo (runs in a forked process).

#include <cstdint>

#include "demo_device.h"

namespace demo {

struct Config {
  const char* url = nullptr;
  int workers = 8;
  int seconds = 20;
  int64_t ttl_ms = 1000;
  int hang_pct = 6;   // holds that pause (SIGSTOP) longer than the TTL
  int crash_pct = 4;  // holds that end in SIGKILL without a release
  int long_pct = 10;  // holds longer than the TTL (the keeper renews)
  bool fair = false;  // FairLock (first come, first served) instead of Lock
  const char* key = "demo:device";
};

// Exit status a worker uses after crashing on purpose (it SIGKILLs itself,
// so the driver sees the signal; this is for the log).
int worker_main(Device& dev, const Config& cfg, int id);

// Prints "  12.345s  wN  <text>" with one write() so lines never interleave.
__attribute__((format(printf, 3, 4))) void say(const Device& dev, int worker, const char* fmt, ...);

}  // namespace demo
