#pragma once
// Test support: a throwaway redis-server on a free loopback port, started
// by fork/exec and stopped by its PID (never by name, never port 6379).

#include <sys/types.h>

#include <string>
#include <vector>

namespace edgelock {
namespace test {

class RedisServer {
 public:
  /// Extra arguments go after the defaults (e.g. {"--requirepass", "pw"}).
  explicit RedisServer(std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Starts the server and waits until it answers PING (bounded: 10 s).
  bool start();
  /// SIGKILL and reap.
  void kill9();
  /// SIGTERM, wait (bounded), SIGKILL if needed.
  void stop();
  bool restart() {
    kill9();
    return start();
  }
  void pause();   // SIGSTOP
  void resume();  // SIGCONT

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

 private:
  std::vector<std::string> extra_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// A TCP port on 127.0.0.1 that was free a moment ago (never 6379).
int free_port();

/// How much to stretch timing bounds (EDGELOCK_TEST_SLOWDOWN, e.g. 10 under
/// qemu); 1 by default.
int slowdown();

}  // namespace test
}  // namespace edgelock
