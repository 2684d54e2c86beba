// Network faults in a network namespace this test creates: a veth
// pair with private addresses 10.213.N.1/30 (root side, the client) and
// 10.213.N.2/30 (namespace side, redis-server started inside it), then
// iptables rules inside the namespace: DROP, REJECT --reject-with
// tcp-reset, and random loss (-m statistic). Traffic stays between the two
// ends of our own veth. Needs root, iproute2 and iptables; skipped (with the
// reason) otherwise. The namespace (and with it the veth pair and every
// rule) is deleted in the fixture's destructor, and stale ones left by a
// killed run are removed first.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../support/fenced_resource.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

constexpr int kPort = 16390;  // inside our own namespace: no clash possible
constexpr Nanos kCommandTimeout = Millis(150);
// Under 30% loss: long enough for TCP to retransmit (RTO >= 200 ms) once.
constexpr Nanos kLossCommandTimeout = Millis(600);
constexpr int64_t kLossWaitMs = 1000;

bool sh(const std::string& cmd) {
  return test::run_program({"sh", "-c", cmd}, "/dev/null", 5000) == 0;
}

// PING over a fresh socket with a 200 ms bound; true on +PONG.
bool ping(const std::string& ip) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(kPort);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  char buf[16] = {};
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6 && recv(fd, buf, 5, 0) == 5 &&
                  std::string(buf, 5) == "+PONG";
  close(fd);
  return ok;
}

class Netns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
    if (!sh("command -v ip && command -v iptables && command -v '" + test::server_binary() + "'")) {
      GTEST_SKIP() << "needs ip (iproute2), iptables and " << test::server_binary();
    }
    const int pid = static_cast<int>(getpid());
    ns_ = "edgelock-t" + std::to_string(pid);
    veth_ = "elt" + std::to_string(pid % 10000000);
    const std::string net = "10.213." + std::to_string(pid % 250 + 1) + ".";
    host_ip_ = net + "1";
    server_ip_ = net + "2";
    // Namespaces left by a killed run of this test (its pid is gone).
    (void)sh(
        "for n in $(ip netns list | awk '/^edgelock-t[0-9]+/ {print $1}'); do "
        "p=${n#edgelock-t}; kill -0 $p 2>/dev/null || ip netns del $n; done");
    if (!sh("ip netns add " + ns_)) GTEST_SKIP() << "cannot create a network namespace here";
    created_ = true;
    const std::string nsx = "ip netns exec " + ns_ + " ";
    if (!sh("ip link add " + veth_ + "a type veth peer name " + veth_ + "b && ip link set " +
            veth_ + "b netns " + ns_ + " && ip addr add " + host_ip_ + "/30 dev " + veth_ +
            "a && ip link set " + veth_ + "a up && " + nsx + "ip addr add " + server_ip_ +
            "/30 dev " + veth_ + "b && " + nsx + "ip link set " + veth_ + "b up && " + nsx +
            "ip link set lo up")) {
      GTEST_SKIP() << "cannot set up a veth pair in the namespace";
    }
    if (!sh(nsx + "iptables -L INPUT -n")) GTEST_SKIP() << "iptables does not work here";
    ASSERT_TRUE(start_server());
  }

  void TearDown() override {
    if (server_pid_ > 0) {
      kill(server_pid_, SIGKILL);
      waitpid(server_pid_, nullptr, 0);
    }
    if (created_) {
      EXPECT_TRUE(sh("ip netns del " + ns_)) << "namespace " << ns_ << " left behind";
      (void)sh("ip link del " + veth_ + "a 2>/dev/null; true");
    }
    if (!dir_.empty()) (void)sh("rm -rf '" + dir_ + "'");
  }

  bool start_server() {
    char tmpl[] = "/tmp/edgelock-netns-XXXXXX";
    if (!mkdtemp(tmpl)) return false;
    dir_ = tmpl;
    const std::vector<std::string> args = {
        "ip", "netns", "exec", ns_, test::server_binary(), "--port", std::to_string(kPort),
        "--bind", server_ip_, "--save", "", "--appendonly", "no", "--dir", dir_, "--daemonize",
        "no", "--loglevel", "warning", "--logfile", dir_ + "/redis.log",
        // Reached from the veth peer, not loopback; the address is private
        // to our own namespace pair.
        "--protected-mode", "no"};
    server_pid_ = fork();  // `ip netns exec` execs the server: same PID
    if (server_pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {  // 5 s at most
      if (ping(server_ip_)) return true;
      usleep(25000);
    }
    return false;
  }

  // iptables inside the namespace: "-A ..." to add, "-D ..." to delete.
  bool rule(const std::string& spec) {
    return sh("ip netns exec " + ns_ + " iptables -w 2 " + spec);
  }

  bool open(Connection& c, Nanos command_timeout = kCommandTimeout) {
    ConnectionOptions o;
    o.connect_timeout = Millis(300) * test::slowdown();
    o.command_timeout = command_timeout * test::slowdown();
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(20);
    const std::string url = "redis://" + server_ip_ + ":" + std::to_string(kPort);
    return c.init(url.c_str(), o).ok();
  }

  std::string ns_, veth_, host_ip_, server_ip_, dir_;
  bool created_ = false;
  pid_t server_pid_ = -1;
};

int64_t ms_since(SystemClock& clock, TimePoint t0) { return test::ms(clock.now() - t0); }

TEST_F(Netns, DropTimesOutWithinDeadlineWithoutFalseGrant) {
  Connection c;
  ASSERT_TRUE(open(c));
  LockOptions lo;
  lo.ttl = Millis(1000);
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("dropped"), lo).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << c.last_error();
  ASSERT_TRUE(l.release().ok());
  const std::string drop = "INPUT -p tcp --dport " + std::to_string(kPort) + " -j DROP";
  ASSERT_TRUE(rule("-A " + drop));
  SystemClock clock;
  const int64_t budget = test::ms(kCommandTimeout * test::slowdown());
  TimePoint t0 = clock.now();
  const Status st = l.try_acquire();
  const int64_t try_ms = ms_since(clock, t0);
  t0 = clock.now();
  const Status wst = l.acquire(Millis(300));  // reconnects into the DROP too
  const int64_t wait_ms = ms_since(clock, t0);
  const bool held_during = l.held();
  ASSERT_TRUE(rule("-D " + drop));
  EXPECT_EQ(st.code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_GE(try_ms, budget);
  EXPECT_LT(try_ms, budget + 50 * test::slowdown());
  EXPECT_EQ(wst.code(), ErrorCode::kTimeout) << wst.to_string() << " " << c.last_error();
  EXPECT_LT(wait_ms, 300 + budget + 50 * test::slowdown());
  EXPECT_FALSE(held_during);
  t0 = clock.now();
  EXPECT_TRUE(l.acquire(Millis(2000)).ok()) << c.last_error();
  const int64_t back_ms = ms_since(clock, t0);
  EXPECT_TRUE(l.release().ok());
  std::printf(
      "netns_drop: try_acquire kTimeout in %lld ms (budget %lld), acquire(300 ms) %s in "
      "%lld ms, no grant; after the rule is removed acquire ok in %lld ms\n",
      static_cast<long long>(try_ms), static_cast<long long>(budget), wst.to_string(),
      static_cast<long long>(wait_ms), static_cast<long long>(back_ms));
}

TEST_F(Netns, RejectWithTcpResetFailsFast) {
  Connection c;
  ASSERT_TRUE(open(c));
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("reset")).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << c.last_error();
  ASSERT_TRUE(l.release().ok());
  const std::string reject =
      "INPUT -p tcp --dport " + std::to_string(kPort) + " -j REJECT --reject-with tcp-reset";
  ASSERT_TRUE(rule("-A " + reject));
  SystemClock clock;
  TimePoint t0 = clock.now();
  const Status st = l.try_acquire();  // on the open connection: RST
  const int64_t rst_ms = ms_since(clock, t0);
  t0 = clock.now();
  const Status st2 = l.try_acquire();  // reconnect: SYN answered by RST
  const int64_t connect_ms = ms_since(clock, t0);
  ASSERT_TRUE(rule("-D " + reject));
  // The RST usually answers our request; but a delayed ACK of the last
  // reply can meet the rule first, and then the idle check sees the reset
  // and the reconnect is refused. Either way: fast, and no grant.
  EXPECT_TRUE(st.code() == ErrorCode::kConnectionClosed || st.code() == ErrorCode::kIo ||
              st.code() == ErrorCode::kConnectFailed)
      << st.to_string() << " " << c.last_error();
  EXPECT_LT(rst_ms, 50 * test::slowdown());
  EXPECT_TRUE(st2.code() == ErrorCode::kConnectFailed || st2.code() == ErrorCode::kNotConnected)
      << st2.to_string();
  EXPECT_LT(connect_ms, 50 * test::slowdown());
  EXPECT_FALSE(l.held());
  EXPECT_TRUE(l.acquire(Millis(1000)).ok()) << c.last_error();
  EXPECT_TRUE(l.release().ok());
  std::printf(
      "netns_reset: open connection -> %s in %lld ms, reconnect -> %s in %lld ms, "
      "then ok\n",
      st.to_string(), static_cast<long long>(rst_ms), st2.to_string(),
      static_cast<long long>(connect_ms));
}

// Shared between the two worker processes.
struct LossStats {
  std::atomic<int> ok{0}, timeouts{0}, closed{0}, connect{0}, busy{0}, unexpected{0};
  std::atomic<int> skipped{0}, max_overrun_ms{0}, release_retries{0};
  std::atomic<int> last_unexpected{0};
};

void note_overrun(LossStats* s, int64_t over) {
  int cur = s->max_overrun_ms.load();
  while (over > cur && !s->max_overrun_ms.compare_exchange_weak(cur, static_cast<int>(over))) {
  }
}

void count(LossStats* s, Status st) {
  switch (st.code()) {
    case ErrorCode::kOk: s->ok++; break;
    case ErrorCode::kTimeout: s->timeouts++; break;
    case ErrorCode::kConnectionClosed:
    case ErrorCode::kIo: s->closed++; break;
    case ErrorCode::kConnectFailed:
    case ErrorCode::kNotConnected: s->connect++; break;
    case ErrorCode::kBusy:
    case ErrorCode::kNotOwner:
    case ErrorCode::kExpired: s->busy++; break;
    default: s->unexpected++; s->last_unexpected = static_cast<int>(st.code());
  }
}

// One worker: grants for `run_for`, writing to the fenced resource only
// while the local validity has a margin left.
void loss_worker(Connection& c, test::FencedResource* res, LossStats* stats, Nanos run_for) {
  SystemClock clock;
  LockOptions lo;
  lo.ttl = Millis(2000);
  Lock l(c);
  if (!l.init(Bytes::from_cstr("lossy"), lo).ok()) _exit(3);
  const int64_t budget = test::ms(kLossCommandTimeout * test::slowdown());
  // Under qemu a round trip with 30 % loss can take seconds: wait longer.
  const int64_t wait_ms = kLossWaitMs * test::slowdown();
  const TimePoint end = clock.now() + run_for;
  for (int i = 0; i < 2000 && clock.now() < end; ++i) {
    TimePoint t0 = clock.now();
    Status st = l.acquire(Millis(wait_ms));
    note_overrun(stats, ms_since(clock, t0) - (wait_ms + budget));
    count(stats, st);
    if (!st.ok()) continue;
    if (l.remaining() > Millis(300)) {
      if (res->enter()) {
        if (!res->write(l.fence())) res->errors++;  // stale fence while valid
        res->grants++;
        clock.sleep_for(Millis(5));
        res->leave();
      }
    } else {
      stats->skipped++;
    }
    // A release lost to the network leaves the token: retry while it is
    // still valid (bounded); after that the server's TTL frees the key and
    // the next acquire starts afresh.
    for (int r = 0; r < 200; ++r) {
      t0 = clock.now();
      st = l.release();
      note_overrun(stats, ms_since(clock, t0) - budget);
      if (st.ok() || st.code() == ErrorCode::kNotOwner || st.code() == ErrorCode::kNotHeld) break;
      stats->release_retries++;
      if (!l.held()) break;
      clock.sleep_for(Millis(5));
    }
  }
}

TEST_F(Netns, RandomLossKeepsMutualExclusionAndDeadlines) {
  constexpr int kProcs = 2;
  // Long enough for several grants natively; under qemu (10x slower, where
  // the first acquire alone pays connect + NOSCRIPT through the loss) three
  // times as long, so "no progress at all" still means a real failure.
  const Nanos run_for = Millis(4000) * (test::slowdown() > 1 ? 3 : 1);
  auto* res = test::FencedResource::create();
  void* mem =
      mmap(nullptr, sizeof(LossStats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(res, nullptr);
  ASSERT_NE(mem, MAP_FAILED);
  auto* stats = new (mem) LossStats();
  const std::string p = std::to_string(kPort);
  const std::string in =
      "INPUT -p tcp --dport " + p + " -m statistic --mode random --probability 0.3 -j DROP";
  const std::string out =
      "OUTPUT -p tcp --sport " + p + " -m statistic --mode random --probability 0.3 -j DROP";
  ASSERT_TRUE(rule("-A " + in));
  ASSERT_TRUE(rule("-A " + out));
  pid_t kids[kProcs];
  for (int k = 0; k < kProcs; ++k) {
    kids[k] = fork();
    if (kids[k] == 0) {
      Connection c;
      if (!open(c, kLossCommandTimeout)) _exit(2);
      loss_worker(c, res, stats, run_for);
      _exit(0);
    }
  }
  int bad_exit = 0;
  for (int k = 0; k < kProcs; ++k) {
    int status = 0;
    // Bound: the run plus one acquire's wait and budget and a release.
    const int polls = static_cast<int>(test::ms(run_for) / 10) + 1500 * test::slowdown();
    for (int i = 0; i < polls; ++i) {
      if (waitpid(kids[k], &status, WNOHANG) == kids[k]) break;
      usleep(10000);
      if (i == polls - 1) {
        kill(kids[k], SIGKILL);
        waitpid(kids[k], &status, 0);
      }
    }
    bad_exit += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_TRUE(rule("-D " + in));
  EXPECT_TRUE(rule("-D " + out));
  EXPECT_EQ(bad_exit, 0);
  EXPECT_EQ(res->overlaps.load(), 0) << "two holders inside at once";
  EXPECT_EQ(res->errors.load(), 0) << "a valid holder's fence was stale";
  EXPECT_EQ(res->stale_rejected.load(), 0);
  EXPECT_EQ(stats->unexpected.load(), 0)
      << "last: " << to_string(static_cast<ErrorCode>(stats->last_unexpected.load()));
  EXPECT_GT(res->grants.load(), 0) << "no progress at all";
  EXPECT_LT(stats->max_overrun_ms.load(), 50 * test::slowdown());
  std::printf(
      "netns_loss30: %d procs for %lld ms, %d grants written (0 overlaps, %d stale "
      "fences), acquire ok %d / timeout %d / reset %d / connect %d / busy %d, "
      "unexpected %d, skipped(validity<300ms) %d, release retries %d, worst overrun %d ms past "
      "budget\n",
      kProcs, static_cast<long long>(test::ms(run_for)), res->grants.load(),
      res->stale_rejected.load(), stats->ok.load(), stats->timeouts.load(), stats->closed.load(),
      stats->connect.load(), stats->busy.load(), stats->unexpected.load(), stats->skipped.load(),
      stats->release_retries.load(), stats->max_overrun_ms.load());
  munmap(mem, sizeof(LossStats));
  munmap(res, sizeof(*res));
}

}  // namespace
}  // namespace edgelock
