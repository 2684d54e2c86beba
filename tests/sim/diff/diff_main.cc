// Differential test: random sequences of the library's requests against the
// simulated Redis and a real redis-server, replies compared byte for byte
// (TTL-like integers within a tolerance). Any divergence fails and prints
// the seed and the requests that led to it.
//
//   diff_test [--seed S] [--seeds N] [--ops N] [--verbose]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>

#include "diff/diff_ops.h"
#include "model/scripts.h"
#include "model/server_core.h"
#include "support/redis_server.h"

namespace edgelock {
namespace sim {
namespace {

int64_t wall_us() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void sleep_ms(int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  nanosleep(&ts, nullptr);
}

int slowdown() {
  const char* s = std::getenv("EDGELOCK_TEST_SLOWDOWN");
  const int v = s ? std::atoi(s) : 1;
  return v > 0 ? v : 1;
}

// A blocking RESP client on one socket (5 s receive bound).
class RealClient {
 public:
  bool connect_to(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RealClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool call(const std::vector<std::string>& argv, RVal* out) {
    const std::string req = encode_request(argv);
    if (send(fd_, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
      return false;
    for (int i = 0; i < 10000; ++i) {
      size_t used = 0;
      const RParse p = parse_value(buf_.data(), buf_.size(), out, &used);
      if (p == RParse::kComplete) {
        buf_.erase(0, used);
        return true;
      }
      if (p == RParse::kInvalid) return false;
      char tmp[4096];
      const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
    }
    return false;
  }

 private:
  int fd_ = -1;
  std::string buf_;
};

// Waits until no key or permit of the model expires within `margin_ms` of
// now, either way: the model reads the clock just before the real server
// does, and the expiry it set may be a little earlier than the server's.
void settle(ServerCore& model, int64_t margin_ms) {
  for (int round = 0; round < 50; ++round) {
    const int64_t now = wall_us() / 1000;
    int64_t wait_until = -1;
    const Keyspace& ks = model.db(0);
    for (const auto& kv : ks.entries()) {
      const Entry* e = &kv.second;
      std::vector<int64_t> edges;
      if (e->expire_at_ms >= 0) edges.push_back(e->expire_at_ms);
      for (const auto& sc : e->ordered) edges.push_back(static_cast<int64_t>(sc.first));
      // FairLock's waiters: "w:<token>" = "<seq>:<deadline ms>".
      for (const auto& f : e->hash) {
        const size_t colon = f.second.find(':');
        if (f.first.compare(0, 2, "w:") == 0 && colon != std::string::npos)
          edges.push_back(std::atoll(f.second.c_str() + colon + 1));
      }
      for (int64_t t : edges) {
        if (t >= now - margin_ms && t <= now + margin_ms && t + margin_ms > wait_until) {
          wait_until = t + margin_ms;
        }
      }
    }
    if (wait_until < 0) return;
    sleep_ms(wait_until - now + 1);
  }
}

struct Step {
  std::string text;
};

void print_history(const std::deque<Step>& h) {
  std::fprintf(stderr, "last requests (oldest first):\n");
  for (const Step& s : h) std::fprintf(stderr, "  %s\n", s.text.c_str());
}

std::string argv_text(const std::vector<std::string>& argv) {
  std::string t;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) t += ' ';
    t += argv[i].size() > 60
             ? argv[i].substr(0, 20) + "...(" + std::to_string(argv[i].size()) + " bytes)"
             : argv[i];
  }
  return t;
}

// Sends one request to both; false on divergence.
bool both(ServerCore& model, RealClient& real, const std::vector<std::string>& argv, Timed timed,
          int64_t tol, std::deque<Step>* hist, RVal* model_reply, bool verbose, int64_t* rtt_us) {
  const int64_t sent = wall_us();
  const RVal m = model.execute_direct(argv, sent);
  RVal r;
  const bool got = real.call(argv, &r);
  *rtt_us = wall_us() - sent;
  if (!got) {
    std::fprintf(stderr, "real server: no reply to %s\n", argv_text(argv).c_str());
    return false;
  }
  hist->push_back({argv_text(argv) + "  -> " + describe(m)});
  if (hist->size() > 25) hist->pop_front();
  if (verbose) std::printf("%s -> %s\n", argv_text(argv).c_str(), describe(m).c_str());
  *model_reply = m;
  if (replies_agree(m, r, timed, tol)) return true;
  if (*rtt_us > tol * 1000 / 4) {
    // The server answered so late (a loaded machine) that the two clocks
    // may disagree about an expiry: not a model error. The caller resyncs.
    *rtt_us = -1;
    return true;
  }
  print_history(*hist);
  std::fprintf(stderr, "DIVERGENCE on %s\n  model: %s\n  real:  %s\n", argv_text(argv).c_str(),
               encode(m).c_str(), encode(r).c_str());
  return false;
}

struct Totals {
  uint64_t requests = 0, setups = 0, noscript = 0, errors = 0, resyncs = 0;
};

bool run_seed(uint64_t seed, int ops, int port, bool verbose, Totals* t) {
  ServerCore model(nullptr);
  RealClient real;
  if (!real.connect_to(port)) {
    std::fprintf(stderr, "cannot connect to the real server\n");
    return false;
  }
  const int64_t tol = 60 * slowdown();
  const int64_t margin = 25 * slowdown();
  std::deque<Step> hist;
  RVal m;
  int64_t rtt = 0;
  if (!both(model, real, {"FLUSHALL"}, Timed::kNone, tol, &hist, &m, verbose, &rtt) ||
      !both(model, real, {"SCRIPT", "FLUSH"}, Timed::kNone, tol, &hist, &m, verbose, &rtt)) {
    return false;
  }
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < ops; ++i) {
    const DiffOp op = next_op(&rng);
    if (op.sleep_ms > 0) {
      sleep_ms(op.sleep_ms);
      continue;
    }
    settle(model, margin);
    if (!both(model, real, op.argv, op.timed, tol, &hist, &m, verbose, &rtt)) {
      std::fprintf(stderr, "seed %llu, op %d (%s): replay with --seed %llu\n",
                   static_cast<unsigned long long>(seed), i, op.label.c_str(),
                   static_cast<unsigned long long>(seed));
      return false;
    }
    ++(op.setup ? t->setups : t->requests);
    if (m.is_error()) ++t->errors;
    if (op.script && m.is_error() && m.s.compare(0, 8, "NOSCRIPT") == 0) {
      ++t->noscript;
      // As the library does: the body once, which also reloads the cache.
      if (!both(model, real, eval_form(op), op.timed, tol, &hist, &m, verbose, &rtt)) {
        std::fprintf(stderr,
                     "seed %llu, op %d (%s, EVAL after NOSCRIPT): replay with --seed %llu\n",
                     static_cast<unsigned long long>(seed), i, op.label.c_str(),
                     static_cast<unsigned long long>(seed));
        return false;
      }
      ++t->requests;
      if (m.is_error()) ++t->errors;
    }
    if (rtt < 0) {
      ++t->resyncs;
      if (!both(model, real, {"FLUSHALL"}, Timed::kNone, tol, &hist, &m, verbose, &rtt))
        return false;
    }
  }
  return true;
}

int main_impl(int argc, char** argv) {
  uint64_t seed = 1;
  int seeds = 20, ops = 400;
  bool verbose = false, one = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
      one = true;
    } else if (a == "--seeds" && i + 1 < argc) {
      seeds = std::atoi(argv[++i]);
    } else if (a == "--ops" && i + 1 < argc) {
      ops = std::atoi(argv[++i]);
    } else if (a == "--verbose") {
      verbose = true;
    } else {
      std::fprintf(stderr, "usage: %s [--seed S] [--seeds N] [--ops N] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  check_library_scripts();
  test::exit_unless_server();  // 77 (Meson: SKIP) with the reason if there is none
  test::RedisServer server;
  if (!server.start()) {
    std::fprintf(stderr, "cannot start %s\n", test::server_binary().c_str());
    return 1;
  }
  Totals t;
  const int n = one ? 1 : seeds;
  const int64_t start = wall_us();
  for (int k = 0; k < n; ++k) {
    if (!run_seed(seed + static_cast<uint64_t>(k), ops, server.port(), verbose, &t)) return 1;
  }
  std::printf(
      "differential: %d seeds x %d ops: %llu requests (%llu error replies, %llu NOSCRIPT), "
      "%llu state changes, 0 divergences (%llu resyncs after a slow reply), %.1f s\n",
      n, ops, static_cast<unsigned long long>(t.requests),
      static_cast<unsigned long long>(t.errors), static_cast<unsigned long long>(t.noscript),
      static_cast<unsigned long long>(t.setups), static_cast<unsigned long long>(t.resyncs),
      static_cast<double>(wall_us() - start) / 1e6);
  return 0;
}

}  // namespace
}  // namespace sim
}  // namespace edgelock

int main(int argc, char** argv) { return edgelock::sim::main_impl(argc, argv); }
