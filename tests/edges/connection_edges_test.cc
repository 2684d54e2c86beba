// Timing-edge tests: connection. Each test drives one timing edge (a late, lost
// or unknown reply, a frozen server) against a real redis-server (through
// test::DelayProxy where a reply must arrive late or be lost) and asserts
// the lease invariant at the moment that edge could break it.
#include <dlfcn.h>
#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/fake_server.h"
#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/edgelock.h"
#include "primitives/eval_capacity.h"

// Counts name lookups: the library (and hiredis, which binds to the
// executable's definition) resolve through this. A numeric address is not
// counted: getaddrinfo answers it without asking any resolver (hiredis
// connects to the numeric address found by the lookup).
namespace {
std::atomic<int> g_lookups{0};

bool numeric(const char* node) {
  if (!node) return true;
  std::string host(node);
  host = host.substr(0, host.find('%'));
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}
}  // namespace

extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
  if (!numeric(node)) g_lookups.fetch_add(1);
  // A name that never resolves, without asking a real DNS server.
  if (node && std::string(node) == "unresolvable.edgelock.test") return EAI_NONAME;
  using Fn = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
  return real ? real(node, service, hints, res) : EAI_SYSTEM;
}

namespace edgelock {
namespace {

using test::FakeServer;
using test::RedisServer;

TimePoint now() { return default_clock().now(); }

TimePoint boottime() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return TimePoint(std::chrono::seconds(ts.tv_sec) + Nanos(ts.tv_nsec));
}

// Kills the server side of `c` through `admin` (the next command on `c`
// finds the connection closed and reconnects).
void kill_client(Connection& admin, Connection& c) {
  const std::string id = test::run(c, {"CLIENT", "ID"});
  ASSERT_EQ(test::run(admin, {"CLIENT", "KILL", "ID", id}), "1");
}

// The socket's inode, as /proc/<pid>/fd shows it: "socket:[<inode>]".
std::string socket_name(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return "";
  return "socket:[" + std::to_string(st.st_ino) + "]";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ConnectionEdges : public test::SharedServerTest {};

// Another service on the port (here: an HTTP server) answers with bytes
// that start no RESP reply. The text says so once, without repeating the
// code's own name, and asks whether this is a Redis port at all.
TEST(ConnectionEdgesText, ForeignServiceGetsAHint) {
  FakeServer http([](const FakeServer::Argv&) -> std::string {
    return "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  });
  ASSERT_TRUE(http.start());
  Connection c;
  ASSERT_TRUE(c.init(http.url().c_str()).ok());
  const Bytes ping[1] = {Bytes::from_cstr("PING")};
  const Result<const Reply*> r = c.command(ping, Deadline::after(c.clock(), Millis(2000)));
  EXPECT_EQ(r.status().code(), ErrorCode::kProtocol);
  const std::string text = c.last_error();
  EXPECT_NE(text.find("is this a Redis port?"), std::string::npos) << text;
  EXPECT_EQ(text.find("protocol error"), std::string::npos)
      << "the code's name is the caller's to print: " << text;
  http.stop();
}

// last_error() is the last failure's text only until a request succeeds:
// after a timeout and then a good reply it is empty, so "ok" is never
// printed with a stale cause next to it.
TEST_F(ConnectionEdges, ErrorTextClearsOnSuccess) {
  Connection c;
  ConnectionOptions o;
  o.command_timeout = Millis(50);
  ASSERT_TRUE(c.init(server_->url().c_str(), o).ok());
  const Bytes bad[1] = {Bytes::from_cstr("NO-SUCH-COMMAND")};
  EXPECT_FALSE(c.command(bad, Deadline::after(c.clock(), Millis(2000))).ok());
  EXPECT_STRNE(c.last_error(), "") << "the failure has its text";
  const Bytes ping[1] = {Bytes::from_cstr("PING")};
  ASSERT_TRUE(c.command(ping, Deadline::after(c.clock(), Millis(2000))).ok()) << c.last_error();
  EXPECT_STREQ(c.last_error(), "");
}

// A NOSCRIPT reply whose EVAL fallback does not fit the command buffer
// must not leave the command "in flight" for good (every later command on
// the connection would return kInvalidArgument).
TEST_F(ConnectionEdges, NoscriptFallbackTooLongLeavesConnectionUsable) {
  // EVALSHA of this script fits; its EVAL (the whole body) does not.
  std::string body = "return 'x' -- ";
  body.append(kTxBufferSize - body.size(), 'p');
  const Script big = make_script(body.c_str());
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  const Result<const Reply*> r = a_.eval({&big}, Deadline::after(a_.clock(), Millis(2000)));
  EXPECT_EQ(r.status().code(), ErrorCode::kBufferTooSmall) << a_.last_error();
  EXPECT_FALSE(detail::io(a_).busy()) << "nothing may stay in flight after a failed fallback";
  EXPECT_EQ(test::run(a_, {"PING"}), "PONG") << "the connection must stay usable";
  Lock lock(a_);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("after-noscript")).ok());
  EXPECT_TRUE(lock.try_acquire().ok()) << a_.last_error();
  EXPECT_TRUE(lock.release().ok()) << a_.last_error();
}

// After SCRIPT FLUSH every primitive re-sends its script as EVAL; at the
// longest key the build allows that must fit the command buffer (for
// example ReentrantLock with a 64-byte key needs 1,055 bytes, more than a
// 1,024-byte buffer).
TEST_F(ConnectionEdges, EveryScriptFitsAfterScriptFlushAtMaxKeyLength) {
  const std::string key(kMaxKeyLen, 'k');
  const std::string owner(kMaxTokenLen, 'o');
  const Bytes k(key.data(), key.size());
  ReentrantLock re(a_);
  ASSERT_TRUE(re.init(k, {}, Bytes(owner.data(), owner.size())).ok());
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(re.try_acquire().ok()) << a_.last_error();
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(re.extend(Millis(5000)).ok()) << a_.last_error();
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(re.release().ok()) << a_.last_error();

  const std::string lock_key(kMaxKeyLen, 'l');
  Lock lock(a_);
  ASSERT_TRUE(lock.init(Bytes(lock_key.data(), lock_key.size())).ok());
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(lock.try_acquire().ok()) << a_.last_error();
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(lock.release().ok()) << a_.last_error();

  const std::string sem_key(kMaxKeyLen, 's');
  Semaphore sem(a_);
  ASSERT_TRUE(sem.init(Bytes(sem_key.data(), sem_key.size())).ok());
  Permit p;
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(sem.try_acquire(&p).ok()) << a_.last_error();
  ASSERT_EQ(test::run(admin_, {"SCRIPT", "FLUSH"}), "OK");
  EXPECT_TRUE(p.release().ok()) << a_.last_error();
  EXPECT_EQ(test::run(a_, {"PING"}), "PONG");
}

// The build check: the figure the static_assert in eval_capacity.h
// compares with the buffer, printed for whoever sizes tx_buffer_size.
TEST(ConnectionEdgesCapacity, EvalCapacity) {
  std::printf(
      "eval capacity: longest EVAL %zu B, BLPOP + EVALSHA %zu B at max_key_len %zu; "
      "tx_buffer_size %zu B (at least %zu)\n",
      detail::kLongestEval, detail::kLongestPipelinedWait, kMaxKeyLen, kTxBufferSize,
      detail::kTxBufferNeeded);
  EXPECT_LE(detail::kLongestEval, kTxBufferSize);
  EXPECT_LE(detail::kLongestPipelinedWait, kTxBufferSize);
  EXPECT_GT(detail::kLongestEval, detail::kReentrantAcquireScript.len + kMaxKeyLen);
}

// Close-on-exec: set only by the command-line tool, and only on the first
// connect; after a reconnect the Redis socket leaked into every child.
TEST_F(ConnectionEdges, SocketIsCloseOnExecAfterReconnect) {
  ASSERT_EQ(test::run(a_, {"PING"}), "PONG");
  const int first = fcntl(detail::io(a_).fd(), F_GETFD);
  ASSERT_GE(first, 0);
  EXPECT_TRUE(first & FD_CLOEXEC) << "first connect";
  const uint32_t connects = a_.stats().connects;
  kill_client(admin_, a_);
  ASSERT_EQ(test::run(a_, {"PING"}), "PONG") << a_.last_error();
  ASSERT_GT(a_.stats().connects, connects) << "the kill must have forced a reconnect";
  const int flags = fcntl(detail::io(a_).fd(), F_GETFD);
  ASSERT_GE(flags, 0);
  EXPECT_TRUE(flags & FD_CLOEXEC) << "reconnect";
  // And a child started now does not hold the socket.
  const std::string log = server_->dir() + "/cloexec.log";
  std::remove(log.c_str());
  ASSERT_EQ(test::run_program({"sh", "-c", "ls -l /proc/$$/fd"}, log, 5000 * test::slowdown()), 0);
  const std::string fds = read_file(log);
  ASSERT_NE(fds.find("->"), std::string::npos) << fds;
  EXPECT_EQ(fds.find(socket_name(detail::io(a_).fd())), std::string::npos) << "inherited: " << fds;
}

// Suspend: the default clock was CLOCK_MONOTONIC, which stops while the
// device sleeps; a lease's validity must count time suspended. A time
// namespace with a BOOTTIME offset tells the two clocks apart.
TEST(ConnectionEdgesClock, DefaultClockCountsSuspend) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Our children enter a namespace where BOOTTIME is 1000 s ahead.
    if (unshare(CLONE_NEWTIME) != 0) _exit(3);
    FILE* f = std::fopen("/proc/self/timens_offsets", "w");
    if (!f || std::fprintf(f, "boottime 1000 0\n") < 0 || std::fclose(f) != 0) _exit(3);
    const pid_t child = fork();
    if (child == 0) {
      const TimePoint before = boottime();
      const TimePoint t = default_clock().now();
      const TimePoint after = boottime();
      _exit(before <= t && t <= after ? 0 : 1);
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st)) _exit(4);
    _exit(WEXITSTATUS(st));
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) {
    // No time namespaces here (not root, old kernel): bracket only.
    const TimePoint before = boottime();
    const TimePoint t = default_clock().now();
    EXPECT_TRUE(before <= t && t <= boottime());
    GTEST_SKIP() << "no time namespace: cannot tell BOOTTIME from MONOTONIC";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "default_clock() must read CLOCK_BOOTTIME";
  // Sleeping on it works (clock_nanosleep on BOOTTIME).
  const TimePoint t0 = boottime();
  default_clock().sleep_for(Millis(30));
  const Nanos slept = boottime() - t0;
  EXPECT_GE(slept, Millis(30));
  EXPECT_LT(slept, Millis(30) + Millis(100) * test::slowdown());
}

// Name resolution: a lookup has no timeout of ours, so a reconnect during
// a renewal must never call the resolver. The name is looked up once (here
// by the first connect: init() does no I/O), reconnects go to the address.
TEST_F(ConnectionEdges, ReconnectDoesNotResolveTheHostNameAgain) {
  Connection c;
  const int at_init = g_lookups.load();
  ASSERT_TRUE(test::open(c, "redis://localhost:" + std::to_string(server_->port())));
  EXPECT_EQ(g_lookups.load(), at_init) << "init() looks nothing up";
  EXPECT_EQ(c.stats().lookups, 0u);
  EXPECT_EQ(c.addresses().count, 0) << "a name has no address before its lookup";
  ASSERT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();
  EXPECT_EQ(c.stats().lookups, 1u) << "the first connect looked the name up";
  const int lookups = g_lookups.load();
  for (int i = 0; i < 3; ++i) {
    kill_client(admin_, c);
    ASSERT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();
  }
  EXPECT_GE(c.stats().connects, 4u);
  EXPECT_EQ(g_lookups.load(), lookups) << "reconnects must not call the resolver";
  EXPECT_EQ(c.stats().lookups, 1u) << "one lookup, by the first connect";
  ASSERT_GE(c.addresses().count, 1);
  EXPECT_NE(c.addresses().addrs[0].family, 0);
  // Looking up again is explicit, and the connection keeps working.
  EXPECT_TRUE(c.resolve().ok()) << c.last_error();
  EXPECT_EQ(c.stats().lookups, 2u);
  kill_client(admin_, c);
  EXPECT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();

  // A name that did not resolve: the first connect tried once; later
  // connects fail fast and never look up, until resolve() does.
  Connection u;
  ASSERT_TRUE(test::open(u, "redis://unresolvable.edgelock.test:6379"));
  const int before = g_lookups.load();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(u.connect().code(), ErrorCode::kConnectFailed);
    EXPECT_NE(std::string(u.last_error()).find("not resolved"), std::string::npos)
        << u.last_error();
  }
  EXPECT_EQ(g_lookups.load(), before + 1) << "only the first connect looked up";
  EXPECT_EQ(u.stats().lookups, 1u);
  EXPECT_EQ(u.resolve().code(), ErrorCode::kConnectFailed) << "resolve() looks up again";
  EXPECT_EQ(g_lookups.load(), before + 2);
}

// resolve() right after init() is where the lookup happens: no connect or
// reconnect calls the resolver after it.
TEST_F(ConnectionEdges, ResolveAfterInitKeepsTheLookupOutOfConnects) {
  Connection c;
  ASSERT_TRUE(test::open(c, "redis://localhost:" + std::to_string(server_->port())));
  ASSERT_TRUE(c.resolve().ok()) << c.last_error();
  EXPECT_EQ(c.stats().lookups, 1u);
  ASSERT_GE(c.addresses().count, 1);
  const int lookups = g_lookups.load();
  ASSERT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();
  kill_client(admin_, c);
  ASSERT_EQ(test::run(c, {"PING"}), "PONG") << c.last_error();
  EXPECT_EQ(g_lookups.load(), lookups) << "connects must not call the resolver after resolve()";
  EXPECT_EQ(c.stats().lookups, 1u);
}

// IP literals are their own address from init() on, scoped IPv6 included:
// nothing to look up, ever.
TEST(ConnectionEdgesLiteral, InitTakesAnIpLiteralWithoutALookup) {
  const int before = g_lookups.load();
  Connection v4;
  ASSERT_TRUE(v4.init("redis://127.0.0.1:1").ok()) << v4.last_error();
  ASSERT_EQ(v4.addresses().count, 1);
  EXPECT_EQ(v4.addresses().addrs[0].family, 4);
  Connection v6;
  ASSERT_TRUE(v6.init("redis://[::1]:1").ok()) << v6.last_error();
  ASSERT_EQ(v6.addresses().count, 1);
  EXPECT_EQ(v6.addresses().addrs[0].family, 6);
  Connection scoped;
  ASSERT_TRUE(scoped.init("redis://[fe80::1%1]:1").ok()) << scoped.last_error();
  ASSERT_EQ(scoped.addresses().count, 1);
  EXPECT_EQ(scoped.addresses().addrs[0].family, 6);
  EXPECT_EQ(scoped.addresses().addrs[0].scope_id, 1u);
  Connection name;
  ASSERT_TRUE(name.init("redis://unresolvable.edgelock.test:1").ok()) << name.last_error();
  EXPECT_EQ(name.addresses().count, 0) << "a name waits for resolve() or a connect";
  EXPECT_EQ(g_lookups.load(), before);
  EXPECT_EQ(v4.stats().lookups + v6.stats().lookups + scoped.stats().lookups + name.stats().lookups,
            0u);
  // The control: a connect looks the name up (and counts it).
  EXPECT_EQ(name.connect().code(), ErrorCode::kConnectFailed);
  EXPECT_EQ(g_lookups.load(), before + 1);
  EXPECT_EQ(name.stats().lookups, 1u);
}

// Sentinel and Cluster init() look no sentinel or seed name up: their
// connections' first connects do.
TEST(ConnectionEdgesLiteral, SentinelAndClusterInitLookNothingUp) {
  const int before = g_lookups.load();
  Sentinel s;
  ASSERT_TRUE(s.init("redis-sentinel://unresolvable.edgelock.test:26379,localhost:26380/gw").ok())
      << s.last_error();
  Cluster c;
  ASSERT_TRUE(
      c.init("redis-cluster://unresolvable.edgelock.test:7000,unresolvable.edgelock.test:7001")
          .ok())
      << c.last_error();
  EXPECT_EQ(g_lookups.load(), before);
  EXPECT_EQ(c.node(0).stats().lookups + c.node(1).stats().lookups, 0u);
  // The control: the first use connects to a seed, which looks it up.
  EXPECT_FALSE(c.refresh(Deadline::after(default_clock(), Millis(200) * test::slowdown())).ok());
  EXPECT_GT(g_lookups.load(), before);
}

// Sentinel: a ROLE reply too large for the reply buffer is not taken as
// "is a primary", so an unverified node never gets the lock commands.
TEST(ConnectionEdgesSentinel, RoleReplyTooLargeIsNotConfirmed) {
  FakeServer node([](const FakeServer::Argv& argv) -> std::string {
    if (!argv.empty() && argv[0] == "ROLE") {
      // A sentinel watching many masters (or any node) with a huge reply.
      std::string r = "*2\r\n$8\r\nsentinel\r\n*40\r\n";
      for (int i = 0; i < 40; ++i) r += "$6\r\nmaster\r\n";
      return r;
    }
    if (!argv.empty() && argv[0] == "PING") return "+PONG\r\n";
    return ":1\r\n";  // would look like a grant
  });
  ASSERT_TRUE(node.start());
  const int node_port = node.port();
  FakeServer sentinel([node_port](const FakeServer::Argv& argv) -> std::string {
    if (argv.size() == 3 && argv[0] == "SENTINEL") {
      const std::string port = std::to_string(node_port);
      return "*2\r\n$9\r\n127.0.0.1\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
    }
    return "-ERR unknown\r\n";
  });
  ASSERT_TRUE(sentinel.start());
  Sentinel s;
  ConnectionOptions o;
  o.command_timeout = Millis(500) * test::slowdown();
  ASSERT_TRUE(
      s.init(("redis-sentinel://127.0.0.1:" + std::to_string(sentinel.port()) + "/gw").c_str(), o)
          .ok());
  const Status st = s.resolve(Deadline::after(default_clock(), Millis(1000) * test::slowdown()));
  EXPECT_FALSE(st.ok()) << "a node whose role could not be read is not a primary";
  Lock lock(s);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("gate")).ok());
  EXPECT_FALSE(lock.try_acquire().ok());
  EXPECT_FALSE(lock.held());
  for (const auto& argv : node.commands()) {
    EXPECT_TRUE(argv.empty() || argv[0] == "ROLE") << "sent to an unverified node: " << argv[0];
  }
  node.stop();
  sentinel.stop();
}

// Every call ends by its deadline whatever the server
// does: a frozen server during connect (AUTH, SELECT), during a command,
// and during the EVAL fallback after NOSCRIPT.
TEST(ConnectionEdgesDeadline, HungServerEndsEveryCallByItsDeadline) {
  RedisServer server({"--requirepass", "pw"});
  ASSERT_TRUE(server.start());
  const Nanos budget = Millis(300);
  const Nanos slack = Millis(100) * test::slowdown();
  ConnectionOptions o;
  o.connect_timeout = Millis(5000);  // the operation's deadline must win
  o.command_timeout = Millis(5000);
  Connection c;
  ASSERT_TRUE(
      c.init(("redis://:pw@127.0.0.1:" + std::to_string(server.port()) + "/1").c_str(), o).ok());
  server.pause();
  const Bytes ping[1] = {Bytes::from_cstr("PING")};
  TimePoint t0 = now();
  Result<const Reply*> r = c.command(ping, Deadline::after(c.clock(), budget));
  Nanos took = now() - t0;
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << c.last_error();
  EXPECT_LT(took, budget + slack) << "connect + AUTH + SELECT on a frozen server";
  t0 = now();
  EXPECT_EQ(c.connect(Deadline::after(c.clock(), budget)).code(), ErrorCode::kTimeout);
  EXPECT_LT(now() - t0, budget + slack) << "connect() itself";
  server.resume();
  ASSERT_TRUE(c.connect(Deadline::after(c.clock(), Millis(2000) * test::slowdown())).ok())
      << c.last_error();
  server.pause();
  t0 = now();
  r = c.command(ping, Deadline::after(c.clock(), budget));
  took = now() - t0;
  server.resume();
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout);
  EXPECT_GE(took, budget);
  EXPECT_LT(took, budget + slack) << "a command on a frozen server";
  EXPECT_EQ(test::run(c, {"PING"}), "PONG") << "reconnects after the timeout";

  // NOSCRIPT, then the EVAL fallback gets no answer.
  FakeServer fake([](const FakeServer::Argv& argv) -> std::string {
    if (!argv.empty() && argv[0] == "EVALSHA") return "-NOSCRIPT No matching script.\r\n";
    return "+PONG\r\n";
  });
  fake.script({});
  ASSERT_TRUE(fake.start());
  Connection f;
  ASSERT_TRUE(f.init(fake.url().c_str(), o).ok());
  ASSERT_EQ(test::run(f, {"PING"}), "PONG");
  fake.script({test::reply("-NOSCRIPT No matching script.\r\n"), test::silent()});
  const Script s = make_script("return 1");
  t0 = now();
  r = f.eval({&s}, Deadline::after(f.clock(), budget));
  took = now() - t0;
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << f.last_error();
  EXPECT_LT(took, budget + slack) << "the EVAL fallback keeps the operation's deadline";
  fake.stop();
}

}  // namespace
}  // namespace edgelock
