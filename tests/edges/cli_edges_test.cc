// Timing-edge tests: the `edgelock` tool's bounded
// exits, clean-up after a failed acquire and its exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../integration/cli_fixture.h"
#include "../support/fake_server.h"
#include "delay_proxy.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers
using test::DelayProxy;
using test::FakeServer;
using test::slowdown;

class CliEdges : public CliTest {
 protected:
  // Waits (bounded) until `key` is gone from the suite's server.
  bool gone_soon(const std::string& key, int64_t limit_ms) {
    const int64_t end = now_ms() + limit_ms;
    while (redis({"PTTL", key}) != "-2") {
      if (now_ms() > end) return false;
      usleep(5000);
    }
    return true;
  }
};

// A hung (SIGSTOPped) server must not make `acquire` and `run` with the
// default wait hang for ever: they give up (exit 3) once the server has
// not answered for --server-wait, within --server-wait + 2 x the command
// budget (TTL/4 = 500 ms here), and say so on stderr. The quorum form
// (majority hung) likewise.
TEST_F(CliEdges, HungServerEndsAcquireAndRunWithinServerWait) {
  RedisServer hung;
  ASSERT_TRUE(hung.start());
  hung.pause();
  const std::vector<std::string> opts = {"-t", "2000", "--server-wait", "1500"};
  auto with = [&](std::vector<std::string> tail) {
    std::vector<std::string> all = opts;
    all.insert(all.end(), tail.begin(), tail.end());
    return all;
  };
  const int64_t t0 = now_ms();
  const std::vector<std::pair<std::string, pid_t>> started = {
      {"acq", start(with({"acquire", "modem"}), "acq", {}, hung.url())},
      {"run", start(with({"run", "modem", "--", "true"}), "run", {}, hung.url())},
      {"quorum", start(with({"-u", hung.url(), "-u", server_->url(), "acquire", "modem"}), "quorum",
                       {}, hung.url())},
  };
  // 1500 + 2 x 500 ms, plus 1 s for start-up and scheduling.
  const int64_t bound = (1500 + 2 * 500 + 1000) * slowdown();
  for (const auto& [tag, pid] : started) {
    const Outcome o = finish(pid, tag, t0, bound);
    EXPECT_EQ(o.rc, 3) << tag << ": " << o.err;
    EXPECT_LT(o.ms, bound) << tag;
    EXPECT_GE(o.ms, 1500) << tag << ": gave up before --server-wait";
    EXPECT_NE(o.err.find("not answering"), std::string::npos) << tag << ": " << o.err;
  }
  hung.resume();
}

// An acquire whose reply is lost (the server ran it) exits 3 without
// leaving the key for its whole TTL: the tool releases (bounded by its
// command budget) before exiting: once the delayed bytes
// have landed, the key is gone long before its TTL.
TEST_F(CliEdges, LostAcquireReplyIsReleasedBeforeExit) {
  // TTL 6000 -> command budget 1500 ms; 1800 ms each way loses every reply.
  // Scripts cached first (as on any server in use): EVALSHA runs at once.
  ASSERT_EQ(cli({"run", "warm-up", "--", "true"}).rc, 0);
  DelayProxy proxy(server_->port(), Millis(1800));
  ASSERT_TRUE(proxy.start());
  const Outcome o = cli({"-t", "6000", "-w", "0", "acquire", "modem"}, {}, proxy.url());
  EXPECT_EQ(o.rc, 3) << o.err;
  proxy.set_delay(Nanos::zero());
  ASSERT_TRUE(proxy.wait_idle(Millis(5000 * slowdown())));
  // The acquire landed at ~1.8 s with PX 6000: without the release the key
  // lives until ~7.8 s after the start.
  EXPECT_TRUE(gone_soon("modem", 300 * slowdown()))
      << "PTTL " << redis({"PTTL", "modem"}) << "; " << o.err;
}

// Quorum form: the same through three delayed servers.
TEST_F(CliEdges, LostQuorumAcquireReplyIsReleasedBeforeExit) {
  RedisServer s2, s3;
  ASSERT_TRUE(s2.start());
  ASSERT_TRUE(s3.start());
  const Outcome warm = cli({"-u", s2.url(), "-u", s3.url(), "run", "warm-up", "--", "true"});
  ASSERT_EQ(warm.rc, 0) << warm.err;
  // Quorum rounds last TTL/50 = 120 ms; 300 ms each way loses every reply.
  DelayProxy p1(server_->port(), Millis(300)), p2(s2.port(), Millis(300)),
      p3(s3.port(), Millis(300));
  ASSERT_TRUE(p1.start() && p2.start() && p3.start());
  const Outcome o = cli(
      {"-t", "6000", "-w", "0", "-u", p2.url(), "-u", p3.url(), "acquire", "modem"}, {}, p1.url());
  EXPECT_EQ(o.rc, 3) << o.err;
  for (DelayProxy* p : {&p1, &p2, &p3}) {
    p->set_delay(Nanos::zero());
    ASSERT_TRUE(p->wait_idle(Millis(5000 * slowdown())));
  }
  EXPECT_TRUE(gone_soon("modem", 300 * slowdown()))
      << "PTTL " << redis({"PTTL", "modem"}) << "; " << o.err;
  Connection c2, c3;
  ASSERT_TRUE(test::open(c2, s2.url()) && test::open(c3, s3.url()));
  EXPECT_EQ(test::run(c2, {"PTTL", "modem"}), "-2");
  EXPECT_EQ(test::run(c3, {"PTTL", "modem"}), "-2");
}

// Exit codes: a reply larger than the fixed capacities is a server or
// protocol fault (exit 3), not a usage error (exit 2).
TEST_F(CliEdges, OversizedReplyIsAServerError) {
  FakeServer fake([](const FakeServer::Argv& argv) -> std::string {
    if (!argv.empty() && argv[0] == "PTTL") return "$70000\r\n" + std::string(70000, 'x') + "\r\n";
    if (!argv.empty() && (argv[0] == "EVALSHA" || argv[0] == "EVAL")) {
      std::string big = "*20\r\n";
      for (int i = 0; i < 20; ++i) big += ":1\r\n";
      return big;
    }
    return "+OK\r\n";
  });
  ASSERT_TRUE(fake.start());
  const Outcome s = cli({"status", "modem"}, {}, fake.url());
  EXPECT_EQ(s.rc, 3) << s.err;
  EXPECT_NE(s.err.find("larger than"), std::string::npos) << s.err;
  const Outcome a = cli({"-w", "0", "acquire", "modem"}, {}, fake.url());
  EXPECT_EQ(a.rc, 3) << a.err;
  // Caller-supplied things that do not fit stay usage errors.
  EXPECT_EQ(cli({"status", std::string(kMaxKeyLen + 1, 'k')}, {}, fake.url()).rc, 2);
  fake.stop();
}

// Another service on the port: one "protocol error:" (not two), and the
// hint that this may not be a Redis port.
TEST_F(CliEdges, ForeignServiceIsNamedOnce) {
  FakeServer http([](const FakeServer::Argv&) -> std::string {
    return "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
  });
  ASSERT_TRUE(http.start());
  const Outcome o = cli({"status", "modem"}, {}, http.url());
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_NE(o.err.find("protocol error: "), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("protocol error: protocol error"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("is this a Redis port?"), std::string::npos) << o.err;
  http.stop();
}

// A grant whose lease ran out before its reply arrived (here: a TTL shorter
// than the drift allowance) is reported as what happened, exit 3, not as
// "held by another owner (0 ms left)" / "all permits in use".
TEST_F(CliEdges, GrantTooLateSaysSo) {
  // Load both scripts first: with -t 1 the command budget is the 5 ms
  // floor, which a NOSCRIPT + EVAL round trip can exceed under qemu (then
  // the outcome is a timeout, not the late grant this test is about).
  ASSERT_EQ(cli({"-t", "1000", "-w", "0", "acquire", "warm"}).rc, 0);
  ASSERT_EQ(cli({"-t", "1000", "-w", "0", "semaphore", "warm-pool", "--permits", "1"}).rc, 0);
  const Outcome a = cli({"-t", "1", "-w", "0", "acquire", "modem"});
  EXPECT_EQ(a.rc, 3) << a.err;
  EXPECT_NE(a.err.find("granted too late"), std::string::npos) << a.err;
  EXPECT_EQ(a.err.find("held by another"), std::string::npos) << a.err;
  EXPECT_EQ(redis({"EXISTS", "modem"}), "0") << "handed back";
  const Outcome s = cli({"-t", "1", "-w", "0", "semaphore", "pool", "--permits", "1"});
  EXPECT_EQ(s.rc, 3) << s.err;
  EXPECT_NE(s.err.find("granted too late"), std::string::npos) << s.err;
  EXPECT_EQ(s.err.find("in use"), std::string::npos) << s.err;
  // The library's name for the code would say the opposite of what happened.
  EXPECT_EQ((a.err + s.err).find("expired before grant"), std::string::npos) << a.err << s.err;
}

// With a TTL no grant can outlive (1 or 2 ms, under the drift allowance),
// every grant comes too late and is handed back. The hand-back release
// always succeeds; it must not count as the server answering, or the
// --server-wait clock restarts after each try and the wait never ends
// (stderr filling with "not answering" / "answers again").
TEST_F(CliEdges, UselessGrantsEndTheWaitWithinServerWait) {
  ASSERT_EQ(cli({"-t", "1000", "-w", "0", "acquire", "warm"}).rc, 0);
  for (const std::string ttl : {"1", "2"}) {
    for (const std::string verb : {"acquire", "run"}) {
      std::vector<std::string> args = {"-t", ttl, "--server-wait", "1000", verb, "modem"};
      if (verb == "run") args.insert(args.end(), {"--", "true"});
      const int64_t t0 = now_ms();
      // 1000 ms + 2 command budgets (5 ms floor) + start-up and scheduling.
      const int64_t bound = 3000 * slowdown();
      const Outcome o = finish(start(args, "late"), "late", t0, bound);
      const std::string what = verb + " -t " + ttl + ": ";
      EXPECT_EQ(o.rc, 3) << what << o.err;
      EXPECT_LT(o.ms, bound) << what;
      EXPECT_NE(o.err.find("no usable answer"), std::string::npos) << what << o.err;
      EXPECT_EQ(o.err.find("answers again"), std::string::npos) << what << o.err;
      EXPECT_LE(std::count(o.err.begin(), o.err.end(), '\n'), 4) << what << o.err;
    }
  }
  EXPECT_EQ(redis({"EXISTS", "modem"}), "0") << "handed back";
}

// Message and exit code agree: a quorum `status` that a majority answered
// while one server hangs printed "status failed at ..." and exited 0. It
// now warns that the server did not answer, without "failed".
TEST_F(CliEdges, QuorumStatusWithAHungServerDoesNotSayFailed) {
  RedisServer hung;
  ASSERT_TRUE(hung.start());
  hung.pause();
  const std::string s = server_->url();
  ASSERT_EQ(redis({"SET", "modem", "someone", "PX", "60000"}), "OK");
  const Outcome st =
      cli({"-t", "2000", "-u", s + "/1", "-u", hung.url(), "status", "modem"}, {}, s);
  EXPECT_EQ(st.rc, 0) << st.err;
  EXPECT_EQ(st.out, "free\n") << "held on 1 of 3 servers only";
  EXPECT_EQ(st.err.find("failed"), std::string::npos) << st.err;
  EXPECT_NE(st.err.find("did not answer"), std::string::npos) << st.err;
  hung.resume();
}

}  // namespace
}  // namespace edgelock
