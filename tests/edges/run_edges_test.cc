// Timing-edge tests: the lease keeper and the
// `edgelock` tool (run must not outlive its lease, bounded exits).
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "../integration/cli_fixture.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"
#include "edgelock/lease_keeper.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::slowdown;

// How late a poll loop may wake after a deadline on a loaded machine.
Nanos loop_slack() { return Millis(50) * slowdown(); }

// Runs the keeper's poll loop until it is no longer keeping (bounded).
// Returns the latest instant a step() call returned.
TimePoint keep_until_lost(LeaseKeeper& keeper, Clock& clock, Nanos limit) {
  const TimePoint stop_at = clock.now() + limit;
  TimePoint last_return;
  for (int i = 0; i < 10000 && keeper.state() == LeaseState::kKeeping && clock.now() < stop_at;
       ++i) {
    poll(nullptr, 0, keeper.next_deadline().poll_timeout_ms(clock));
    keeper.step();
    last_return = clock.now();
  }
  return last_return;
}

bool connect_with(Connection& c, const std::string& url, Nanos command_timeout) {
  ConnectionOptions o;
  o.command_timeout = command_timeout;
  return c.init(url.c_str(), o).ok() && c.connect().ok();
}

// A renewal stalled by a partition must not make the keeper report the
// loss after another client holds the key. Our client's replies
// are lost (proxy delay 30 s); another client tries directly all along.
TEST(RunEdges, KeeperReportsLossByValidityEndUnderPartition) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  test::DelayProxy proxy(server.port(), Nanos::zero());
  ASSERT_TRUE(proxy.start());
  Connection conn;
  ASSERT_TRUE(connect_with(conn, proxy.url(), Millis(250) * slowdown()));
  Clock& clock = conn.clock();
  Lock lock(conn);
  LockOptions lo;
  lo.ttl = Millis(1000 * slowdown());
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok());
  const TimePoint end = clock.now() + lock.remaining();
  proxy.set_delay(Millis(30000) * slowdown());  // partition: nothing of ours gets through

  std::atomic<TimePoint> granted_at{TimePoint()};
  std::atomic<bool> stop{false};
  std::thread other([&] {
    Connection oc;
    if (!connect_with(oc, server.url(), Millis(500) * slowdown())) return;
    Lock ol(oc);
    if (!ol.init(Bytes::from_cstr("modem")).ok()) return;
    // Bounded by the main thread's stop (time) and a count that a 2 ms
    // poll cannot use up before the key expires, even under qemu.
    for (int i = 0; i < 20000 * slowdown() && !stop.load(); ++i) {
      if (ol.try_acquire().ok()) {
        granted_at.store(clock.now());
        return;
      }
      poll(nullptr, 0, 2);
    }
  });
  const TimePoint last_return = keep_until_lost(keeper, clock, Millis(5000) * slowdown());
  for (int i = 0; i < 1000 && granted_at.load() == TimePoint(); ++i) poll(nullptr, 0, 5);
  stop.store(true);
  other.join();
  ASSERT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_LE(keeper.lost_at(), end + loop_slack()) << "reported after the validity ended";
  EXPECT_LE(last_return, end + loop_slack()) << "the caller's loop was blocked past the validity";
  ASSERT_GT(granted_at.load(), TimePoint()) << "the other client never got the key";
  EXPECT_GE(granted_at.load(), keeper.lost_at()) << "another client held the key while we kept it";
}

// With the default command timeout (2 s), a 3 s lease on a frozen server
// must not make the keeper block past the end of the validity.
TEST(RunEdges, KeeperWithDefaultOptionsReportsLossByValidityEnd) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  Connection conn;
  ASSERT_TRUE(conn.init(server.url().c_str()).ok());  // default ConnectionOptions
  Clock& clock = conn.clock();
  Lock lock(conn);
  LockOptions lo;
  lo.ttl = Millis(3000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("modem"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper keeper(lock);
  ASSERT_TRUE(keeper.start().ok()) << "a 3 s lease fits the default 2 s budget";
  // Healthy first: the keeper really keeps it with these options.
  for (int i = 0; i < 100 && keeper.stats().renewals < 2 && !keeper.lost(); ++i) {
    poll(nullptr, 0, keeper.next_deadline().poll_timeout_ms(clock));
    keeper.step();
  }
  ASSERT_EQ(keeper.stats().renewals, 2u);
  const TimePoint end = clock.now() + lock.remaining();
  server.pause();
  const TimePoint last_return = keep_until_lost(keeper, clock, Millis(8000) * slowdown());
  server.resume();
  ASSERT_EQ(keeper.state(), LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
  EXPECT_LE(keeper.lost_at(), end + loop_slack()) << "reported after the validity ended";
  EXPECT_LE(last_return, end + loop_slack()) << "a renewal overran the validity";

  // A lease too short for even one renewal within the budget is refused.
  Lock short_lock(conn);
  lo.ttl = Millis(2000);
  ASSERT_TRUE(short_lock.init(Bytes::from_cstr("short"), lo).ok());
  ASSERT_TRUE(short_lock.try_acquire().ok()) << conn.last_error();
  LeaseKeeper refused(short_lock);
  EXPECT_EQ(refused.start().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.state(), LeaseState::kIdle);
}

// --- edgelock run -------------------------------------------------------

using cli_test::now_ms;
using cli_test::Outcome;
using cli_test::slurp;

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// True once `pid` is gone or a zombie (orphans may wait for a reaper).
bool dead(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(f, stat)) return true;
  const size_t paren = stat.rfind(") ");
  return paren == std::string::npos || stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

bool dies_within(pid_t pid, int64_t ms) {
  const int64_t until = now_ms() + ms * slowdown();
  while (!dead(pid) && now_ms() < until) usleep(5000);
  return dead(pid);
}

class RunEdgesCli : public cli_test::CliTest {
 protected:
  // As start(), but the tool inherits nothing beyond stdio: the test's own
  // sockets must not be mistaken for edgelock's.
  pid_t start_bare(const std::vector<std::string>& args, const std::string& tag,
                   const std::vector<std::string>& urls) {
    std::vector<std::string> all = cli_test::wrapper_words();
    all.push_back(cli_);
    for (const std::string& u : urls) all.insert(all.end(), {"-u", u});
    all.insert(all.end(), args.begin(), args.end());
    const pid_t pid = fork();
    if (pid == 0) {
      if (!freopen((dir_ + "/" + tag + ".out").c_str(), "w", stdout)) _exit(99);
      if (!freopen((dir_ + "/" + tag + ".err").c_str(), "w", stderr)) _exit(99);
      for (int fd = 3; fd < 1024; ++fd) close(fd);
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(98);
    }
    return pid;
  }
  // Waits (bounded) until `path` has some content.
  bool wait_for_file(const std::string& path, int64_t ms = 3000) {
    const int64_t until = now_ms() + ms * slowdown();
    while (slurp(path).empty() && now_ms() < until) usleep(5000);
    return !slurp(path).empty();
  }
  // A command that ignores SIGTERM and appends a wall-clock timestamp (ns)
  // to `log` every 10 ms.
  std::vector<std::string> ticker(const std::string& log) {
    return {"sh", "-c", "trap '' TERM; while :; do date +%s%N >> " + log + "; sleep 0.01; done"};
  }
  static int64_t last_tick(const std::string& log) {
    std::istringstream in(slurp(log));
    int64_t t = 0, last = 0;
    while (in >> t) last = t;
    return last;
  }
  // Runs the ticker under edgelock over `n` servers (each behind a proxy),
  // partitions edgelock from all of them, and lets another client take
  // the key directly: the ticker must write nothing from then on.
  void stubborn_command_stops_in_time(int n);
};

void RunEdgesCli::stubborn_command_stops_in_time(int n) {
  std::vector<std::unique_ptr<RedisServer>> servers;
  std::vector<std::unique_ptr<test::DelayProxy>> proxies;
  std::vector<std::string> urls;
  for (int i = 0; i < n; ++i) {
    servers.emplace_back(new RedisServer());
    ASSERT_TRUE(servers.back()->start());
    proxies.emplace_back(new test::DelayProxy(servers.back()->port(), Nanos::zero()));
    ASSERT_TRUE(proxies.back()->start());
    urls.push_back(proxies.back()->url());
  }
  const std::string log = dir_ + "/ticks";
  std::vector<std::string> args = {"-t", std::to_string(1000 * slowdown()), "run", "dev", "--"};
  for (const std::string& w : ticker(log)) args.push_back(w);
  const int64_t t0 = now_ms();
  const pid_t pid = start_bare(args, "stubborn", urls);
  ASSERT_TRUE(wait_for_file(log)) << slurp(dir_ + "/stubborn.err");
  for (auto& p : proxies) p->set_delay(Millis(30000) * slowdown());  // edgelock partitioned
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<Connection*> ptrs;
  for (auto& s : servers) {
    conns.emplace_back(new Connection());
    ASSERT_TRUE(test::open(*conns.back(), s->url()));
    ptrs.push_back(conns.back().get());
  }
  Lock single(*ptrs[0]);
  QuorumLock quorum;
  ASSERT_TRUE(n == 1 ? single.init(Bytes::from_cstr("dev")).ok()
                     : quorum.init(ptrs.data(), ptrs.size(), Bytes::from_cstr("dev")).ok());
  int64_t granted = 0;
  // Time bounds the loop; the count only backs it up (a try costs ~10x
  // under qemu, so a count of 2000 ran out before the TTL did).
  for (int i = 0; i < 20000 * slowdown() && granted == 0 && now_ms() < t0 + 8000 * slowdown();
       ++i) {
    if ((n == 1 ? single.try_acquire() : quorum.try_acquire()).ok()) granted = wall_ns();
    usleep(2000);
  }
  Outcome o = finish(pid, "stubborn", t0);
  ASSERT_GT(granted, 0) << "the other client never got the key";
  EXPECT_EQ(o.rc, 4) << o.err;
  const int64_t last = last_tick(log);
  EXPECT_LT(last, granted) << "COMMAND wrote " << (last - granted) / 1000000
                           << " ms after another client was granted the key; " << o.err;
}

// `run` gave SIGTERM only after the validity ended (plus the renewal's
// overrun) and SIGKILL --grace later: a command ignoring SIGTERM wrote on
// while another client held the key.
TEST_F(RunEdgesCli, StubbornCommandStopsBeforeAnotherClientHoldsTheKey) {
  stubborn_command_stops_in_time(1);
}

// The same over a quorum of three servers (`-u` three times).
TEST_F(RunEdgesCli, StubbornCommandStopsBeforeAnotherClientHoldsTheQuorumKey) {
  stubborn_command_stops_in_time(3);
}

// kill -9 of edgelock left COMMAND running without any lease.
TEST_F(RunEdgesCli, CommandDiesWithEdgelock) {
  const std::string pidfile = dir_ + "/pid";
  const int64_t t0 = now_ms();
  const pid_t pid =
      start_bare({"run", "dev", "--", "sh", "-c", "echo $$ > " + pidfile + "; exec sleep 30"},
                 "orphan", {server_->url()});
  ASSERT_TRUE(wait_for_file(pidfile)) << slurp(dir_ + "/orphan.err");
  const pid_t child = std::atoi(slurp(pidfile).c_str());
  ASSERT_GT(child, 0);
  ASSERT_FALSE(dead(child));
  kill(pid, SIGKILL);
  finish(pid, "orphan", t0);
  EXPECT_TRUE(dies_within(child, 1000)) << "COMMAND outlived edgelock";
  if (!dead(child)) kill(child, SIGKILL);
}

// A socket created by a reconnect (while waiting for the lock) was not
// close-on-exec and leaked into COMMAND.
TEST_F(RunEdgesCli, CommandGetsNoSocketAfterAReconnect) {
  ASSERT_EQ(redis({"SET", "dev", "someone", "PX", std::to_string(800 * slowdown())}), "OK");
  const std::string fds = dir_ + "/fds";
  const int64_t t0 = now_ms();
  const pid_t pid =
      start_bare({"--stats", "run", "dev", "--", "sh", "-c", "ls -l /proc/$$/fd > " + fds}, "fds",
                 {server_->url()});
  usleep(300000 * slowdown());  // edgelock is waiting for "dev" now
  EXPECT_NE(redis({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"}), "0");
  Outcome o = finish(pid, "fds", t0);
  ASSERT_EQ(o.rc, 0) << o.err;
  const size_t stats = o.err.find("stats connection:");
  ASSERT_NE(stats, std::string::npos) << o.err;
  const std::string line = o.err.substr(stats, o.err.find('\n', stats) - stats);
  EXPECT_EQ(line.find("reconnects=0"), std::string::npos) << "no reconnect happened: " << line;
  const std::string listing = slurp(fds);
  ASSERT_NE(listing.find("0 ->"), std::string::npos) << listing;
  EXPECT_EQ(listing.find("socket:"), std::string::npos) << "COMMAND inherited a socket:\n"
                                                        << listing;
}

// A --grace that does not fit the TTL would let SIGKILL come after the lease ends.
TEST_F(RunEdgesCli, GraceThatDoesNotFitTheTtlIsRefused) {
  Outcome o = cli({"-t", "1000", "--grace", "600", "run", "dev", "--", "true"});
  EXPECT_EQ(o.rc, 2) << o.err;
  EXPECT_NE(o.err.find("--grace 600 does not fit --ttl 1000"), std::string::npos) << o.err;
  EXPECT_EQ(redis({"EXISTS", "dev"}), "0") << "refused before acquiring";
  EXPECT_EQ(
      cli({"-t", "1000", "--grace", "500", "--permits", "1", "semaphore", "dev", "--", "true"}).rc,
      0);
  EXPECT_EQ(
      cli({"-t", "1000", "--grace", "501", "--permits", "1", "semaphore", "dev", "--", "true"}).rc,
      2);
  EXPECT_EQ(cli({"-t", "1000", "--grace", "500", "run", "dev", "--", "true"}).rc, 0);
}

// Signals went to COMMAND's pid only: a grandchild survived the loss.
TEST_F(RunEdgesCli, GrandchildInTheProcessGroupIsKilled) {
  const std::string gpid = dir_ + "/gpid";
  const int64_t t0 = now_ms();
  const pid_t pid = start_bare({"-t", std::to_string(1000 * slowdown()), "run", "dev", "--", "sh",
                                "-c", "trap '' TERM; sleep 30 & echo $! > " + gpid + "; wait"},
                               "group", {server_->url()});
  ASSERT_TRUE(wait_for_file(gpid)) << slurp(dir_ + "/group.err");
  const pid_t grandchild = std::atoi(slurp(gpid).c_str());
  ASSERT_GT(grandchild, 0);
  ASSERT_EQ(redis({"DEL", "dev"}), "1");  // lost at the next renewal
  Outcome o = finish(pid, "group", t0);
  EXPECT_EQ(o.rc, 4) << o.err;
  EXPECT_TRUE(dies_within(grandchild, 500)) << "the grandchild outlived the lease; " << o.err;
  if (!dead(grandchild)) kill(grandchild, SIGKILL);
}

}  // namespace
}  // namespace edgelock
