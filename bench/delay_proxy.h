#pragma once
// Emulated network latency on loopback, for the tests and the benchmarks
// (the kernel here has no netem). A DelayProxy listens on a free 127.0.0.1 port and forwards
// every connection to 127.0.0.1:<upstream>, delivering the bytes of each
// direction a fixed one-way delay after it read them; EOF and resets are
// passed on after the same delay. One thread, one poll() over all sockets.
// Tests and benchmarks only (never a product target): it uses threads and
// the heap freely.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "edgelock/clock.h"

namespace edgelock {
namespace test {

class DelayProxy {
 public:
  /// Forwards to 127.0.0.1:`upstream_port` with `delay` each way.
  DelayProxy(int upstream_port, Nanos delay);
  /// Stops the thread (within ~10 ms) and closes every socket.
  ~DelayProxy();
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  /// Binds 127.0.0.1:0 (the kernel picks a free port: no race with other
  /// tests) and starts the thread. False if it cannot listen.
  bool start();
  /// One-way delay for bytes read from now on (bytes already queued keep
  /// their delivery time). Safe to call from any thread while running.
  void set_delay(Nanos delay) { delay_.store(delay); }
  Nanos delay() const { return delay_.load(); }

  /// Holds back one chunk: the next one read in direction `dir` (0: client
  /// to server, 1: server to client) whose bytes contain `pattern` (empty:
  /// any) is delivered `extra` later than the delay says. The chunks after
  /// it on that connection wait behind it, as TCP would; other connections
  /// (a reconnect) are not held. A request held past the client's timeout
  /// still reaches the server when its time comes, as through a slow
  /// network or a frozen server. One rule per direction; any thread.
  void hold_next(int dir, const std::string& pattern, Nanos extra);
  /// True once the rule of `dir` has caught its chunk.
  bool held(int dir);

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  /// Connections accepted so far (a reconnect shows as one more).
  int accepted() const { return accepted_.load(); }
  /// Connections open now.
  int open_pairs() const { return open_pairs_.load(); }
  /// Chunks (and end-of-stream marks) read but not yet delivered, as of
  /// the thread's last pass. 0 twice in a row: all traffic sent a while
  /// ago has landed.
  int queued() const { return queued_.load(); }
  /// Waits (bounded by `limit`) until queued() reads 0 twice 5 ms apart.
  bool wait_idle(Nanos limit) const;

  struct Pair;  // one client connection and its upstream connection

 private:
  struct Hold {
    bool armed = false;
    bool caught = false;
    std::string pattern;
    Nanos extra{0};
  };
  void run();
  void accept_one();
  // The extra delay of a chunk of `dir` with these bytes (a hold it matches).
  Nanos extra_for(int dir, const char* data, size_t len);
  Nanos wait_budget(TimePoint now) const;

  int upstream_port_;
  std::atomic<Nanos> delay_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> open_pairs_{0};
  std::atomic<int> queued_{0};
  std::mutex hold_mu_;
  Hold hold_[2];
  std::vector<std::unique_ptr<Pair>> pairs_;  // the proxy thread's only
  std::thread thread_;
};

}  // namespace test
}  // namespace edgelock
