#pragma once
// The simulated network as the library's byte transport: plugged into each
// client's Connection through ConnectionOptions::transport. Every wait
// (connect, readiness, a read that may wait) hands the client's fiber back
// to the scheduler, which runs the rest of the world until the bytes come
// or the deadline passes on the client's own clock.

#include <poll.h>

#include "edgelock/detail/transport.h"
#include "world/world.h"

namespace edgelock {
namespace sim {

/// Servers are addressed as 127.0.0.1:(kSimPortBase + index).
constexpr int kSimPortBase = 7000;
/// A connection's "descriptor" (Transport::fd(), what wait_fds() hands a
/// poll loop) is kSimFdBase + its connection id.
constexpr int kSimFdBase = 1 << 20;

class SimTransport final : public Transport {
 public:
  SimTransport(World* world, int client) : w_(world), client_(client) {}
  ~SimTransport() { close(); }
  SimTransport(const SimTransport&) = delete;
  SimTransport& operator=(const SimTransport&) = delete;

  Status open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
              Deadline deadline, Clock& clock, ErrorText& err) override;
  void close() override;
  bool is_open() const override { return conn_ >= 0; }
  Result<size_t> write_some(const uint8_t* data, size_t n, ErrorText& err) override;
  Result<size_t> read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) override;
  Result<size_t> wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                      ErrorText& err) override;
  bool has_stale_input() const override;
  int fd() const override { return conn_ >= 0 ? kSimFdBase + conn_ : -1; }

 private:
  bool readable() const;
  int64_t true_deadline(Deadline d) const;

  World* w_;
  int client_;
  int conn_ = -1;
};

/// poll() of a simulated process: hands the fiber back until one of
/// `fds` (simulated descriptors) is ready or `deadline` (on the client's
/// clock) passes; sets revents. Returns how many are ready.
size_t sim_poll(World& w, int client, pollfd* fds, size_t n, Deadline deadline);

}  // namespace sim
}  // namespace edgelock
