#include "delay_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>

namespace edgelock {
namespace test {

namespace {

constexpr size_t kReadSize = 16384;
constexpr size_t kMaxQueuedBytes = 1 << 20;  // per direction; then stop reading
constexpr size_t kMaxPairs = 64;
constexpr Nanos kMaxWait = Millis(10);  // how often the thread checks stop_

TimePoint now() { return default_clock().now(); }

void tune(int fd) {
  const int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct Chunk {
  TimePoint due;
  std::string data;  // empty: end of stream
  size_t sent = 0;
};

// Bytes read from `from`, waiting for their time to be written to `to`.
struct Direction {
  int from = -1;
  int to = -1;
  std::deque<Chunk> queue;
  size_t queued = 0;
  bool read_done = false;   // EOF/error read: an end-of-stream chunk is queued
  bool write_done = false;  // end of stream passed on (shutdown of `to`)
  bool blocked = false;     // the last send would block: wait for POLLOUT

  bool wants_read() const { return !read_done && queued < kMaxQueuedBytes; }
};

// Reads what is there (once); queues it with its delivery time. `extra`
// gives a chunk's added delay (a hold). A chunk is never due before the one
// ahead of it: the stream keeps its order.
template <typename Extra>
void read_in(Direction& d, Nanos delay, Extra extra) {
  char buf[kReadSize];
  const ssize_t n = recv(d.from, buf, sizeof buf, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  TimePoint due = now() + delay;
  if (!d.queue.empty() && d.queue.back().due > due) due = d.queue.back().due;
  if (n <= 0) {  // EOF or reset: passed on as EOF, after the delay
    d.queue.push_back(Chunk{due, std::string(), 0});
    d.read_done = true;
    return;
  }
  due += extra(buf, static_cast<size_t>(n));
  d.queue.push_back(Chunk{due, std::string(buf, static_cast<size_t>(n)), 0});
  d.queued += static_cast<size_t>(n);
}

// Writes the chunks that are due, in order. False on a write error.
bool deliver(Direction& d, TimePoint t) {
  for (size_t i = 0; i < 1024 && !d.queue.empty() && d.queue.front().due <= t; ++i) {
    Chunk& c = d.queue.front();
    if (c.data.empty()) {
      (void)shutdown(d.to, SHUT_WR);
      d.write_done = true;
      d.queue.pop_front();
      return true;
    }
    const ssize_t n = send(d.to, c.data.data() + c.sent, c.data.size() - c.sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      d.blocked = true;
      return true;
    }
    if (n < 0) return false;
    c.sent += static_cast<size_t>(n);
    if (c.sent < c.data.size()) continue;
    d.queued -= c.data.size();
    d.queue.pop_front();
  }
  return true;
}

}  // namespace

struct DelayProxy::Pair {
  int fd[2] = {-1, -1};  // client, upstream
  Direction dir[2];      // client -> upstream, upstream -> client
  bool dead = false;

  ~Pair() {
    for (int f : fd) {
      if (f >= 0) close(f);
    }
  }
  bool done() const { return dead || (dir[0].write_done && dir[1].write_done); }
  // poll() interest for fd[i]: reading its direction, or a blocked send into it.
  short events(int i) const {
    short e = 0;
    if (dir[i].wants_read()) e |= POLLIN;
    if (dir[1 - i].blocked) e |= POLLOUT;
    return e;
  }
};

DelayProxy::DelayProxy(int upstream_port, Nanos delay)
    : upstream_port_(upstream_port), delay_(delay) {}

DelayProxy::~DelayProxy() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();  // the loop wakes every kMaxWait
  pairs_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
}

bool DelayProxy::start() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      listen(listen_fd_, 64) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return false;
  }
  port_ = ntohs(a.sin_port);
  tune(listen_fd_);
  thread_ = std::thread([this] { run(); });
  return true;
}

bool DelayProxy::wait_idle(Nanos limit) const {
  const TimePoint end = now() + limit;
  int zeros = 0;
  for (int i = 0; i < 100000 && now() < end; ++i) {
    zeros = queued() == 0 ? zeros + 1 : 0;
    if (zeros == 2) return true;
    SystemClock().sleep_for(Millis(5));
  }
  return false;
}

void DelayProxy::hold_next(int dir, const std::string& pattern, Nanos extra) {
  std::lock_guard<std::mutex> g(hold_mu_);
  hold_[dir & 1] = Hold{true, false, pattern, extra};
}

bool DelayProxy::held(int dir) {
  std::lock_guard<std::mutex> g(hold_mu_);
  return hold_[dir & 1].caught;
}

Nanos DelayProxy::extra_for(int dir, const char* data, size_t len) {
  std::lock_guard<std::mutex> g(hold_mu_);
  Hold& h = hold_[dir & 1];
  if (!h.armed) return Nanos::zero();
  if (!h.pattern.empty() && std::string(data, len).find(h.pattern) == std::string::npos) {
    return Nanos::zero();
  }
  h.armed = false;
  h.caught = true;
  return h.extra;
}

void DelayProxy::accept_one() {
  const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (client < 0) return;
  if (pairs_.size() >= kMaxPairs) {
    close(client);
    return;
  }
  // Blocking connect: loopback answers at once (refused if nothing listens).
  const int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(upstream_port_));
  if (up < 0 || connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (up >= 0) close(up);
    close(client);  // the client sees EOF, as if the server were gone
    return;
  }
  tune(client);
  tune(up);
  std::unique_ptr<Pair> p(new Pair);
  p->fd[0] = client;
  p->fd[1] = up;
  p->dir[0].from = client;
  p->dir[0].to = up;
  p->dir[1].from = up;
  p->dir[1].to = client;
  pairs_.push_back(std::move(p));
  accepted_.fetch_add(1);
}

// Until the earliest queued chunk is due, at most kMaxWait.
Nanos DelayProxy::wait_budget(TimePoint t) const {
  Nanos wait = kMaxWait;
  for (const auto& p : pairs_) {
    for (const Direction& d : p->dir) {
      if (d.queue.empty() || d.blocked) continue;
      wait = std::min(wait, std::max<Nanos>(Nanos::zero(), d.queue.front().due - t));
    }
  }
  return wait;
}

void DelayProxy::run() {
  std::vector<pollfd> fds;
  while (!stop_.load()) {  // bounded: the destructor sets stop_
    const TimePoint t = now();
    for (auto& p : pairs_) {
      for (Direction& d : p->dir) {
        if (!d.blocked && !deliver(d, t)) p->dead = true;
      }
    }
    pairs_.erase(std::remove_if(pairs_.begin(), pairs_.end(),
                                [](const std::unique_ptr<Pair>& p) { return p->done(); }),
                 pairs_.end());
    open_pairs_.store(static_cast<int>(pairs_.size()));
    size_t queued = 0;
    for (const auto& p : pairs_) queued += p->dir[0].queue.size() + p->dir[1].queue.size();
    queued_.store(static_cast<int>(queued));
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (const auto& p : pairs_) {
      for (int i = 0; i < 2; ++i) {
        const short e = p->events(i);
        fds.push_back(pollfd{e ? p->fd[i] : -1, e, 0});  // fd -1: ignored
      }
    }
    const Nanos wait = wait_budget(t);
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(wait);
    const timespec ts{static_cast<time_t>(secs.count()), static_cast<long>((wait - secs).count())};
    if (ppoll(fds.data(), fds.size(), &ts, nullptr) <= 0) continue;
    const Nanos delay = delay_.load();
    for (size_t k = 0; k < pairs_.size(); ++k) {
      for (int i = 0; i < 2; ++i) {
        const short r = fds[1 + 2 * k + static_cast<size_t>(i)].revents;
        Pair& p = *pairs_[k];
        if ((r & POLLOUT) || (r & (POLLERR | POLLHUP))) p.dir[1 - i].blocked = false;
        if ((r & (POLLIN | POLLERR | POLLHUP)) && p.dir[i].wants_read()) {
          read_in(p.dir[i], delay,
                  [this, i](const char* b, size_t n) { return extra_for(i, b, n); });
        }
      }
    }
    if (fds[0].revents & POLLIN) accept_one();
  }
}

}  // namespace test
}  // namespace edgelock
