#pragma once
// Test support: a scripted fake Redis server, for what a real one cannot do
// (stall, dribble bytes, reset mid-reply, send garbage). Listens on an
// ephemeral 127.0.0.1 port; one thread accepts, one thread per connection
// serves. Each complete command taken off any connection consumes the next
// scripted action; when the script is used up, a fallback handler answers
// like a well-behaved server. Every wait is bounded and stop() ends all
// threads within ~20 ms.

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace edgelock {
namespace test {

/// What the fake server does with one incoming command.
struct FakeAction {
  enum class Kind { kReply, kSlow, kSilent, kClose, kReset };
  Kind kind = Kind::kReply;
  std::string bytes;       ///< Sent first (byte by byte for kSlow).
  int byte_delay_ms = 0;   ///< kSlow: pause before each byte.
  int extra_delay_ms = 0;  ///< Pause before `extra`.
  std::string extra;       ///< Sent after `bytes` (an unsolicited reply).
};

/// Sends `b` in one write.
FakeAction reply(std::string b);
/// Sends `b` one byte at a time, `ms` before each byte.
FakeAction slow(std::string b, int ms);
/// Sends `b` (maybe nothing), then never answers on this connection again.
FakeAction silent(std::string b = "");
/// Sends `b`, then closes with FIN.
FakeAction close_after(std::string b = "");
/// Sends `b`, then aborts with RST (SO_LINGER 0).
FakeAction reset_after(std::string b = "");
/// Sends `b`, waits `ms`, sends `extra` (a reply nobody asked for).
FakeAction reply_then(std::string b, int ms, std::string extra);

class FakeServer {
 public:
  using Argv = std::vector<std::string>;
  /// Answers commands once the script is used up (raw RESP bytes).
  using Handler = std::function<std::string(const Argv&)>;

  explicit FakeServer(Handler fallback);
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  /// Binds 127.0.0.1:0 and starts accepting. False on failure.
  bool start();
  /// Stops accepting, closes every connection and joins all threads.
  void stop();

  /// Appends actions for the next commands (on any connection).
  void script(std::vector<FakeAction> actions);
  /// Scripted actions not consumed yet.
  size_t pending() const;
  /// Every command received so far, in order.
  std::vector<Argv> commands() const;
  int connections() const { return accepted_.load(); }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  void accept_loop();
  void serve(int fd);
  bool perform(int fd, const FakeAction& a, bool* mute);
  bool pause_ms(int ms) const;

  Handler fallback_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::deque<FakeAction> script_;
  std::vector<Argv> commands_;
  std::vector<std::thread> workers_;
};

}  // namespace test
}  // namespace edgelock
