// edgelock-delay-proxy: emulated network latency for the benchmarks (the
// kernel here has no netem). One DelayProxy (delay_proxy.h) per upstream
// port; prints each listening port on its own line, then runs until stdin
// closes or SIGTERM. scripts/bench --delay-ms puts edgelock and the
// bare-hiredis baseline behind the same proxies.
//
//   edgelock-delay-proxy DELAY_MS UPSTREAM_PORT...
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "delay_proxy.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: edgelock-delay-proxy DELAY_MS UPSTREAM_PORT...\n");
    return 2;
  }
  const double delay_ms = std::atof(argv[1]);
  if (!(delay_ms >= 0 && delay_ms <= 10000)) return 2;
  const std::chrono::duration<double, std::milli> ms(delay_ms);
  const edgelock::Nanos delay = std::chrono::duration_cast<edgelock::Nanos>(ms);
  std::vector<std::unique_ptr<edgelock::test::DelayProxy>> proxies;
  for (int i = 2; i < argc; ++i) {
    const int upstream = std::atoi(argv[i]);
    if (upstream <= 0 || upstream > 65535) return 2;
    proxies.emplace_back(new edgelock::test::DelayProxy(upstream, delay));
    if (!proxies.back()->start()) {
      std::fprintf(stderr, "cannot listen for upstream %d\n", upstream);
      return 1;
    }
    std::printf("%d\n", proxies.back()->port());
  }
  std::fflush(stdout);
  // Until our parent closes our stdin (or kills us): bounded by it.
  for (;;) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, -1) < 0) continue;
    char c;
    if (read(STDIN_FILENO, &c, 1) <= 0) break;
  }
  return 0;
}
