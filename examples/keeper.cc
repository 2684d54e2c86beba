// A lease kept from your own poll() loop: the lease keeper renews the lock
// (no thread) while the loop waits on its own descriptors, and says when
// the lease is lost, before anyone else can hold it. Here the loop's only
// descriptor is stdin: each line typed is "written to the device" with the
// fencing token; end of input releases the lock.
//
//   edgelock-keeper [URL]          (default redis://127.0.0.1:6379)
#include <poll.h>
#include <unistd.h>

#include <cstdio>

#include "edgelock/edgelock.h"

using namespace edgelock;

int main(int argc, char** argv) {
  Connection conn;
  Lock lock(conn);
  LockOptions options;
  options.ttl = std::chrono::seconds(6);
  if (!conn.init(argc > 1 ? argv[1] : "redis://127.0.0.1:6379").ok() ||
      !lock.init(Bytes::from_cstr("modem"), options).ok()) {
    std::fprintf(stderr, "keeper: bad setup: %s\n", conn.last_error());
    return 2;
  }
  if (Status s = lock.acquire(std::chrono::seconds(5)); !s.ok()) {
    std::fprintf(stderr, "keeper: not acquired: %s (%s)\n", s.to_string(), conn.last_error());
    return 1;
  }
  LeaseKeeper keeper(lock);
  if (!keeper.start().ok()) return 2;
  char line[256];
  for (;;) {
    pollfd in{STDIN_FILENO, POLLIN, 0};
    // Wakes up for input, or when the keeper has work: a renewal, or the
    // end of the validity.
    const int n = poll(&in, 1, keeper.next_deadline().poll_timeout_ms(conn.clock()));
    if (keeper.step() == LeaseState::kLost) {
      std::fprintf(stderr, "keeper: %s: stop touching the device\n", keeper.loss_text());
      return 4;
    }
    if (n <= 0 || !(in.revents & (POLLIN | POLLHUP))) continue;
    const ssize_t got = read(STDIN_FILENO, line, sizeof line);
    if (got <= 0) break;  // end of input
    std::printf("device <- fence %llu: %.*s", static_cast<unsigned long long>(lock.fence()),
                static_cast<int>(got), line);
  }
  keeper.stop();
  const Status r = lock.release();
  std::printf("released: %s (%u renewals)\n", r.to_string(), keeper.stats().renewals);
  return r.ok() ? 0 : 1;
}
