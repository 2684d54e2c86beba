#include "fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace edgelock {
namespace test {

namespace {

constexpr int kTickMs = 10;  // poll granularity: how fast stop() is noticed

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Parses one "*N\r\n$len\r\narg\r\n..." command from the front of `buf`.
// Returns bytes consumed, 0 if incomplete.
size_t parse_command(const std::string& buf, FakeServer::Argv* argv) {
  argv->clear();
  size_t pos = 0;
  auto line = [&](long* v) {
    const size_t e = buf.find("\r\n", pos);
    if (e == std::string::npos) return false;
    *v = std::strtol(buf.c_str() + pos + 1, nullptr, 10);
    pos = e + 2;
    return true;
  };
  long n = 0;
  if (buf.empty() || buf[0] != '*' || !line(&n)) return 0;
  for (long i = 0; i < n; ++i) {
    long len = 0;
    if (pos >= buf.size() || !line(&len) || len < 0) return 0;
    if (buf.size() < pos + static_cast<size_t>(len) + 2) return 0;
    argv->push_back(buf.substr(pos, static_cast<size_t>(len)));
    pos += static_cast<size_t>(len) + 2;
  }
  return pos;
}

}  // namespace

FakeAction reply(std::string b) {
  FakeAction a;
  a.bytes = std::move(b);
  return a;
}
FakeAction slow(std::string b, int ms) {
  FakeAction a = reply(std::move(b));
  a.kind = FakeAction::Kind::kSlow;
  a.byte_delay_ms = ms;
  return a;
}
FakeAction silent(std::string b) {
  FakeAction a = reply(std::move(b));
  a.kind = FakeAction::Kind::kSilent;
  return a;
}
FakeAction close_after(std::string b) {
  FakeAction a = reply(std::move(b));
  a.kind = FakeAction::Kind::kClose;
  return a;
}
FakeAction reset_after(std::string b) {
  FakeAction a = reply(std::move(b));
  a.kind = FakeAction::Kind::kReset;
  return a;
}
FakeAction reply_then(std::string b, int ms, std::string extra) {
  FakeAction a = reply(std::move(b));
  a.extra_delay_ms = ms;
  a.extra = std::move(extra);
  return a;
}

FakeServer::FakeServer(Handler fallback) : fallback_(std::move(fallback)) {}

FakeServer::~FakeServer() { stop(); }

bool FakeServer::start() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listen_fd_ < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;  // the kernel picks a free ephemeral port (never 6379)
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  port_ = ntohs(a.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
  return true;
}

void FakeServer::stop() {
  stop_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> g(mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

void FakeServer::script(std::vector<FakeAction> actions) {
  std::lock_guard<std::mutex> g(mu_);
  for (FakeAction& a : actions) script_.push_back(std::move(a));
}

size_t FakeServer::pending() const {
  std::lock_guard<std::mutex> g(mu_);
  return script_.size();
}

std::vector<FakeServer::Argv> FakeServer::commands() const {
  std::lock_guard<std::mutex> g(mu_);
  return commands_;
}

void FakeServer::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kTickMs) <= 0) continue;
    const int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    ++accepted_;
    std::lock_guard<std::mutex> g(mu_);
    workers_.emplace_back([this, fd] { serve(fd); });
  }
}

bool FakeServer::pause_ms(int ms) const {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (stop_) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return !stop_;
}

// Returns false when the connection must end (closed, reset, write failed).
bool FakeServer::perform(int fd, const FakeAction& a, bool* mute) {
  using Kind = FakeAction::Kind;
  if (a.kind == Kind::kSlow) {
    for (char c : a.bytes) {
      if (!pause_ms(a.byte_delay_ms) || !send_all(fd, &c, 1)) return false;
    }
  } else if (!a.bytes.empty() && !send_all(fd, a.bytes.data(), a.bytes.size())) {
    return false;
  }
  if (!a.extra.empty() &&
      (!pause_ms(a.extra_delay_ms) || !send_all(fd, a.extra.data(), a.extra.size()))) {
    return false;
  }
  if (a.kind == Kind::kReset) {
    linger l{1, 0};  // close() now sends RST instead of FIN
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    return false;
  }
  if (a.kind == Kind::kClose) return false;
  if (a.kind == Kind::kSilent) *mute = true;
  return true;
}

void FakeServer::serve(int fd) {
  std::string buf;
  bool mute = false;
  bool open = true;
  while (open && !stop_) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kTickMs) <= 0) continue;
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
    Argv argv;
    for (size_t used; open && (used = parse_command(buf, &argv)) > 0;) {
      buf.erase(0, used);
      FakeAction action;
      {
        std::lock_guard<std::mutex> g(mu_);
        commands_.push_back(argv);
        if (mute) continue;
        if (script_.empty()) {
          action = reply(fallback_(argv));
        } else {
          action = script_.front();
          script_.pop_front();
        }
      }
      open = perform(fd, action, &mute);
    }
  }
  close(fd);
}

}  // namespace test
}  // namespace edgelock
