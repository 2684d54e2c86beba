// A quorum (Redlock) lock over independent servers: granted only by a
// majority, with a fencing token that keeps increasing across the quorum.
//
//   edgelock-quorum URL1 URL2 URL3 [...]
#include <cstdio>

#include "edgelock/edgelock.h"

using namespace edgelock;

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? static_cast<size_t>(argc - 1) : 0;
  if (n == 0 || n > kMaxQuorumServers) {
    std::fprintf(stderr, "usage: edgelock-quorum URL1 URL2 URL3 [...] (at most %zu)\n",
                 kMaxQuorumServers);
    return 2;
  }
  Connection conns[kMaxQuorumServers];
  Connection* ptrs[kMaxQuorumServers];
  for (size_t i = 0; i < n; ++i) {
    ptrs[i] = &conns[i];
    if (!conns[i].init(argv[i + 1]).ok()) {
      std::fprintf(stderr, "quorum: bad URL %s: %s\n", argv[i + 1], conns[i].last_error());
      return 2;
    }
  }
  QuorumLock lock;
  QuorumOptions options;
  options.ttl = std::chrono::seconds(10);
  if (!lock.init(ptrs, n, Bytes::from_cstr("modem"), options).ok()) return 2;
  if (Status s = lock.acquire(std::chrono::seconds(5)); !s.ok()) {
    std::fprintf(stderr, "quorum: not acquired: %s (%s)\n", s.to_string(), lock.last_error());
    return 1;
  }
  std::printf("holding modem on a majority of %zu, fence %llu, valid for %lld ms\n", n,
              static_cast<unsigned long long>(lock.fence()),
              static_cast<long long>(std::chrono::duration_cast<Millis>(lock.remaining()).count()));
  const Status r = lock.release();  // ok once a majority confirmed
  std::printf("released on %zu of %zu servers: %s\n", lock.released_on(), n, r.to_string());
  return r.ok() ? 0 : 1;
}
