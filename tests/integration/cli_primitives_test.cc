// edgelock semaphore / cooldown / --stats end to end against a real
// redis-server. Same fixture as cli_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers
using test::slowdown;

using CliPrimitivesTest = CliTest;

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The number after `prefix` in `text` (-1 if absent).
int64_t number_after(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + prefix.size()));
}

TEST_F(CliPrimitivesTest, SemaphoreAdmitsNConcurrentRunsAndRefusesTheNext) {
  const std::string nap = std::to_string(slowdown());  // seconds each holder sleeps
  const int64_t t0 = now_ms();
  const pid_t a =
      start({"-t", "2000", "semaphore", "dl", "--permits", "2", "--", "sleep", nap}, "a");
  const pid_t b =
      start({"-t", "2000", "semaphore", "dl", "--permits", "2", "--", "sleep", nap}, "b");
  // Both hold a permit (bounded wait for them to start).
  for (int i = 0; i < 400 && redis({"ZCARD", "dl"}) != "2"; ++i) usleep(5000);
  ASSERT_EQ(redis({"ZCARD", "dl"}), "2");
  Outcome third = cli({"-w", "0", "semaphore", "dl", "--permits", "2", "--", "true"});
  EXPECT_EQ(third.rc, 1) << third.err;
  EXPECT_TRUE(has(third.err, "all 2 permits in use")) << third.err;
  Outcome count = cli({"semaphore", "dl", "--permits", "2", "--count"});
  EXPECT_EQ(count.out, "2\n");
  Outcome ra = finish(a, "a", t0);
  Outcome rb = finish(b, "b", t0);
  EXPECT_EQ(ra.rc, 0) << ra.err;
  EXPECT_EQ(rb.rc, 0) << rb.err;
  EXPECT_GE(ra.ms, 1000) << "COMMAND ran to its end";
  EXPECT_EQ(redis({"EXISTS", "dl"}), "0") << "both permits released";
  Outcome st = cli({"semaphore", "dl", "--permits", "2", "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(st.rc, 7) << "COMMAND's own status";
}

TEST_F(CliPrimitivesTest, SemaphoreAcquirePrintsIdAndReleaseById) {
  Outcome a = cli({"-t", "5000", "semaphore", "fw", "--permits", "3"});
  ASSERT_EQ(a.rc, 0) << a.err;
  ASSERT_GT(a.out.size(), 1u);
  const std::string id = a.out.substr(0, a.out.size() - 1);
  const int64_t score = std::stoll(redis({"ZSCORE", "fw", id}));
  EXPECT_GT(score, 0) << "the permit is on the server under its id";
  EXPECT_EQ(cli({"semaphore", "fw", "--permits", "3", "--count"}).out, "1\n");
  Outcome j = cli({"--json", "semaphore", "fw", "--permits", "3", "--count"});
  EXPECT_TRUE(has(j.out, "\"in_use\":1,\"permits\":3")) << j.out;

  Outcome stale = cli({"semaphore", "fw", "--permits", "3", "--release", "not-a-permit"});
  EXPECT_EQ(stale.rc, 5) << stale.err;
  EXPECT_TRUE(has(stale.err, "not the owner")) << stale.err;
  EXPECT_EQ(redis({"ZCARD", "fw"}), "1") << "a stale release leaves the permit alone";
  EXPECT_EQ(cli({"semaphore", "fw", "--permits", "3", "--release", id}).rc, 0);
  EXPECT_EQ(redis({"EXISTS", "fw"}), "0");
  EXPECT_EQ(cli({"semaphore", "fw", "--permits", "3", "--release", id}).rc, 5) << "released twice";

  Outcome js = cli({"--json", "-t", "3000", "semaphore", "fw", "--permits", "3"});
  ASSERT_EQ(js.rc, 0) << js.err;
  for (const char* field : {"\"key\":\"fw\"", "\"permit\":\"", "\"permits\":3", "\"ttl_ms\":3000",
                            "\"validity_ms\":"}) {
    EXPECT_TRUE(has(js.out, field)) << field << " in " << js.out;
  }
}

TEST_F(CliPrimitivesTest, SemaphoreUsageErrorsExitTwo) {
  EXPECT_EQ(cli({"semaphore", "k"}).rc, 2) << "--permits is required";
  EXPECT_EQ(cli({"semaphore", "k", "--permits", "0"}).rc, 2);
  EXPECT_EQ(cli({"semaphore", "k", "--permits", "2", "--count", "--release", "x"}).rc, 2);
  EXPECT_EQ(cli({"semaphore", "k", "--permits", "2", "--count", "--", "true"}).rc, 2);
  EXPECT_EQ(cli({"cooldown", "k"}).rc, 2) << "--period is required";
  EXPECT_EQ(cli({"cooldown", "k", "--quota", "3"}).rc, 2) << "--quota needs --window";
  EXPECT_EQ(cli({"cooldown", "k", "--period", "5", "--quota", "3", "--window", "9"}).rc, 2);
  Outcome two = cli({"-u", server_->url(), "cooldown", "k", "--period", "100"});
  EXPECT_EQ(two.rc, 2) << "no quorum variant";
  EXPECT_EQ(redis({"DBSIZE"}), "0") << "nothing was written";
}

TEST_F(CliPrimitivesTest, SemaphoreLostPermitKillsCommandAndExitsFour) {
  const int ttl = 600 * std::min(slowdown(), 4);
  const int64_t t0 = now_ms();
  const pid_t p =
      start({"-t", std::to_string(ttl), "semaphore", "job", "--permits", "1", "--", "sleep", "30"},
            "lost");
  for (int i = 0; i < 400 && redis({"ZCARD", "job"}) != "1"; ++i) usleep(5000);
  ASSERT_EQ(redis({"ZCARD", "job"}), "1");
  usleep(static_cast<useconds_t>(ttl + 100) * 1000);  // past one TTL: the keeper renews it
  ASSERT_EQ(redis({"ZCARD", "job"}), "1") << "renewed past its TTL";
  ASSERT_EQ(redis({"DEL", "job"}), "1");  // taken away: the next renewal fails
  Outcome o = finish(p, "lost", t0, 8000);
  EXPECT_EQ(o.rc, 4) << o.err;
  EXPECT_TRUE(has(o.err, "lost")) << o.err;
  EXPECT_LT(o.ms, ttl + 3000 * slowdown()) << "stopped within a renewal interval plus grace";
}

TEST_F(CliPrimitivesTest, CooldownAllowsOnceThenRefusesUntilThePeriodEnds) {
  const int period = 600 * slowdown();
  const std::string p = std::to_string(period);
  Outcome first = cli({"cooldown", "modem", "--period", p});
  EXPECT_EQ(first.rc, 0) << first.err;
  EXPECT_EQ(first.out, "allowed\n");
  Outcome second = cli({"cooldown", "modem", "--period", p});
  EXPECT_EQ(second.rc, 1) << second.err;
  const int64_t retry = number_after(second.out, "retry-after ");
  EXPECT_GT(retry, 0) << second.out;
  EXPECT_LE(retry, period);
  Outcome js = cli({"--json", "cooldown", "modem", "--period", p});
  EXPECT_EQ(js.rc, 1);
  EXPECT_TRUE(has(js.out, "{\"key\":\"modem\",\"allowed\":false,\"retry_after_ms\":")) << js.out;
  EXPECT_GT(number_after(js.out, "\"retry_after_ms\":"), 0) << js.out;
  const std::string marker = dir_ + "/ran";
  Outcome denied = cli({"cooldown", "modem", "--period", p, "--", "touch", marker});
  EXPECT_EQ(denied.rc, 1);
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "COMMAND must not run when refused";

  // --wait sleeps out the rest of the period, then COMMAND runs with its status.
  Outcome waited = cli({"-w", std::to_string(3 * period), "cooldown", "modem", "--period", p, "--",
                        "sh", "-c", "touch " + marker + "; exit 6"});
  EXPECT_EQ(waited.rc, 6) << waited.err;
  EXPECT_EQ(access(marker.c_str(), F_OK), 0) << "COMMAND ran once allowed";
  EXPECT_EQ(cli({"cooldown", "modem", "--period", p}).rc, 1) << "a new period started";
  usleep(static_cast<useconds_t>(period + 100) * 1000);
  EXPECT_EQ(cli({"cooldown", "modem", "--period", p}).rc, 0) << "allowed again after the period";
}

TEST_F(CliPrimitivesTest, QuotaAllowsMPerWindow) {
  const std::vector<std::string> args = {"--json", "cooldown", "dl",  "--quota",
                                         "2",      "--window", "5000"};
  Outcome a = cli(args);
  Outcome b = cli(args);
  Outcome c = cli(args);
  EXPECT_EQ(a.rc, 0) << a.err;
  EXPECT_TRUE(has(a.out, "\"allowed\":true")) << a.out;
  EXPECT_TRUE(has(a.out, "\"remaining\":1")) << a.out;
  EXPECT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(c.rc, 1) << c.err;
  EXPECT_TRUE(has(c.out, "\"allowed\":false")) << c.out;
  const int64_t retry = number_after(c.out, "\"retry_after_ms\":");
  EXPECT_GT(retry, 0) << c.out;
  EXPECT_LE(retry, 5000);
}

TEST_F(CliPrimitivesTest, StatsPrintsCounters) {
  Outcome a = cli({"--stats", "cooldown", "c", "--period", "5000"});
  EXPECT_EQ(a.rc, 0);
  // A fresh process: the connection counted only this command's attempt.
  EXPECT_TRUE(has(a.err, "stats connection: attempts=1 grants=1 busy=0")) << a.err;
  Outcome b = cli({"--stats", "-q", "cooldown", "c", "--period", "5000"});
  EXPECT_EQ(b.rc, 1);
  EXPECT_TRUE(has(b.err, "stats connection: attempts=1 grants=0 busy=1"))
      << "stats despite -q: " << b.err;
  EXPECT_EQ(b.out.rfind("retry-after ", 0), 0u) << "-q keeps results: " << b.out;

  ASSERT_EQ(cli({"semaphore", "s", "--permits", "1"}).rc, 0);
  Outcome s = cli({"--stats", "-w", "0", "semaphore", "s", "--permits", "1"});
  EXPECT_EQ(s.rc, 1);
  EXPECT_TRUE(has(s.err, "stats connection: attempts=1 grants=0 busy=1")) << s.err;
  Outcome l = cli({"--stats", "acquire", "lk"});
  EXPECT_EQ(l.rc, 0);
  EXPECT_TRUE(has(l.err, "stats connection: attempts=1 grants=1")) << l.err;
  EXPECT_TRUE(has(l.err, "le1ms=") || has(l.err, "le2ms=")) << "latency histogram: " << l.err;
}

// A quorum lock's --stats never shows all-zero counters: a line says its
// rounds are not counted; a server connection that counted nothing is left
// out.
TEST_F(CliPrimitivesTest, QuorumStatsAreNeverAllZero) {
  RedisServer b, c;
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(c.start());
  Outcome q = cli({"--stats", "-u", b.url(), "-u", c.url(), "acquire", "q"});
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_TRUE(has(q.err, "stats quorum lock: ")) << q.err;
  EXPECT_FALSE(
      has(q.err,
          "attempts=0 grants=0 busy=0 not_owner=0 timeouts=0 lost_leases=0 reconnects=0 errors=0"))
      << q.err;
}

// --peek answers without taking; --reset ends the period (or window) now.
TEST_F(CliPrimitivesTest, CooldownPeekAndReset) {
  const std::vector<std::string> cd = {"cooldown", "modem", "--period", "60000"};
  auto with = [&](std::vector<std::string> head, std::vector<std::string> tail = {}) {
    head.insert(head.end(), cd.begin(), cd.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  Outcome p0 = cli(with({}, {"--peek"}));
  EXPECT_EQ(p0.rc, 0) << p0.err;
  EXPECT_EQ(p0.out, "allowed\n");
  EXPECT_EQ(redis({"EXISTS", "modem"}), "0") << "a peek takes nothing";
  EXPECT_EQ(cli(with({})).rc, 0);
  Outcome p1 = cli(with({"--json"}, {"--peek"}));
  EXPECT_EQ(p1.rc, 1);
  EXPECT_TRUE(has(p1.out, "\"allowed\":false")) << p1.out;
  EXPECT_GT(number_after(p1.out, "\"retry_after_ms\":"), 50000) << p1.out;
  Outcome r = cli(with({"--json"}, {"--reset"}));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "{\"key\":\"modem\",\"reset\":true,\"exit\":0}\n");
  EXPECT_EQ(cli(with({}, {"--peek"})).rc, 0) << "allowed again after --reset";

  const std::vector<std::string> qa = {"--json", "cooldown", "dl",   "--quota",
                                       "2",      "--window", "60000"};
  EXPECT_EQ(cli(qa).rc, 0);
  std::vector<std::string> peek = qa;
  peek.push_back("--peek");
  Outcome qp = cli(peek);
  EXPECT_EQ(qp.rc, 0) << qp.err;
  EXPECT_TRUE(has(qp.out, "\"remaining\":1")) << "one of two left, the peek took none: " << qp.out;
  EXPECT_EQ(cli(qa).rc, 0);
  EXPECT_EQ(cli(peek).rc, 1) << "used up";
  std::vector<std::string> reset = qa;
  reset.push_back("--reset");
  EXPECT_EQ(cli(reset).rc, 0);
  EXPECT_TRUE(has(cli(peek).out, "\"remaining\":2")) << "a fresh window";
}

// cooldown waits only with -w; -w forever waits out the period.
TEST_F(CliPrimitivesTest, CooldownWaitsForeverWhenAsked) {
  const std::string p = std::to_string(400 * slowdown());
  EXPECT_EQ(cli({"cooldown", "c", "--period", p}).rc, 0);
  EXPECT_EQ(cli({"cooldown", "c", "--period", p}).rc, 1) << "no -w: no wait";
  Outcome w = cli({"-w", "forever", "cooldown", "c", "--period", p});
  EXPECT_EQ(w.rc, 0) << w.err;
  EXPECT_GE(w.ms, 200);
}

}  // namespace
}  // namespace edgelock
