// The smallest useful program: take one lock, use the device, release.
// Kept minimal on purpose: its stripped, static size is the footprint figure.
#include <cstdio>

#include "edgelock/edgelock.h"

int main(int argc, char** argv) {
  const char* url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  edgelock::Connection conn;
  edgelock::Lock lock(conn);
  edgelock::LockOptions options;
  options.ttl = std::chrono::seconds(10);
  if (!conn.init(url).ok() || !lock.init(edgelock::Bytes::from_cstr("modem"), options).ok()) {
    std::fprintf(stderr, "minimal: bad setup: %s\n", conn.last_error());
    return 2;
  }
  const edgelock::Status s = lock.acquire(std::chrono::seconds(5));
  if (!s.ok()) {
    std::fprintf(stderr, "minimal: not acquired: %s (%s)\n", s.to_string(), conn.last_error());
    return 1;
  }
  std::printf("holding modem, fence %llu\n", static_cast<unsigned long long>(lock.fence()));
  const edgelock::Status r = lock.release();
  if (!r.ok()) std::fprintf(stderr, "minimal: release: %s\n", r.to_string());
  return r.ok() ? 0 : 1;
}
