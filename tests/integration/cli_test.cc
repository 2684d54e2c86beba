// The edgelock tool end to end against a real redis-server. The tool's
// path comes from EDGELOCK_CLI (set by tests/meson.build).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include "cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers
using test::slowdown;

TEST_F(CliTest, AcquireStatusExtendRelease) {
  Outcome a = cli({"-t", "5000", "acquire", "modem"});
  ASSERT_EQ(a.rc, 0) << a.err;
  std::istringstream words(a.out);
  std::string token;
  uint64_t fence = 0;
  words >> token >> fence;
  EXPECT_EQ(token, redis({"GET", "modem"}));
  EXPECT_EQ(fence, 1u);
  const int pttl = std::stoi(redis({"PTTL", "modem"}));
  EXPECT_GT(pttl, 4000);
  EXPECT_LE(pttl, 5000);

  Outcome s = cli({"status", "modem"});
  EXPECT_EQ(s.rc, 0);
  EXPECT_EQ(s.out.substr(0, 5), "held ");
  ASSERT_EQ(redis({"PEXPIRE", "modem", "1000"}), "1");
  EXPECT_EQ(cli({"-t", "8000", "extend", "modem", token}).rc, 0);
  EXPECT_GT(std::stoi(redis({"PTTL", "modem"})), 7000);
  EXPECT_EQ(cli({"extend", "modem", "stale-token"}).rc, 5);
  Outcome bad = cli({"release", "modem", "stale-token"});
  EXPECT_EQ(bad.rc, 5);
  EXPECT_NE(bad.err.find("not the owner"), std::string::npos) << bad.err;
  EXPECT_EQ(redis({"GET", "modem"}), token) << "a stale release leaves the key alone";
  EXPECT_EQ(cli({"release", "modem", token}).rc, 0);
  EXPECT_EQ(redis({"EXISTS", "modem"}), "0");
  EXPECT_EQ(cli({"release", "modem", token}).rc, 5);
  EXPECT_EQ(cli({"extend", "modem", token}).rc, 5);
  EXPECT_EQ(cli({"status", "modem"}).out, "free\n");
  EXPECT_EQ(cli({"-q", "status", "modem"}).out, "free\n") << "-q keeps results";
}

TEST_F(CliTest, JsonCarriesEveryField) {
  Outcome a = cli({"--json", "-t", "3000", "acquire", "k\"q"});
  ASSERT_EQ(a.rc, 0) << a.err;
  for (const char* field : {"\"key\":\"k\\\"q\"", "\"token\":\"", "\"fence\":1", "\"ttl_ms\":3000",
                            "\"validity_ms\":", "\"held\":true"}) {
    EXPECT_NE(a.out.find(field), std::string::npos) << field << " in " << a.out;
  }
  EXPECT_EQ(a.out.back(), '\n');
  EXPECT_EQ(a.out.find('\n'), a.out.size() - 1) << "one object, one line";
  Outcome s = cli({"--json", "status", "k\"q"});
  EXPECT_NE(s.out.find("\"held\":true"), std::string::npos) << s.out;
  Outcome f = cli({"--json", "status", "other"});
  EXPECT_NE(f.out.find("\"held\":false"), std::string::npos) << f.out;
}

TEST_F(CliTest, WaitZeroOnHeldLockFailsAtOnce) {
  ASSERT_EQ(redis({"SET", "modem", "someone", "PX", "60000"}), "OK");
  Outcome o = cli({"-w", "0", "acquire", "modem"});
  EXPECT_EQ(o.rc, 1) << o.err;
  EXPECT_LT(o.ms, 1000 * slowdown()) << "no waiting (bound is loose for loaded CI machines)";
  EXPECT_NE(o.err.find("held by another"), std::string::npos) << o.err;
  Outcome r = cli({"--wait", "0", "run", "modem", "--", "true"});
  EXPECT_EQ(r.rc, 1);
  Outcome w = cli({"-w", "300", "acquire", "modem"});
  EXPECT_EQ(w.rc, 1);
  EXPECT_GE(w.ms, 300);
  EXPECT_LT(w.ms, 2300 * slowdown());
  EXPECT_EQ(redis({"GET", "modem"}), "someone");
}

TEST_F(CliTest, WaitsForAnExpiringHolder) {
  ASSERT_EQ(redis({"SET", "modem", "someone", "PX", "400"}), "OK");
  Outcome o = cli({"acquire", "modem"});  // default: wait forever
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_GE(o.ms, 300);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate", "k"},
      {"--no-such-option", "status", "k"},
      {"-t", "0", "status", "k"},
      {"-t", "ten", "status", "k"},
      {"-w", "-5", "acquire", "k"},
      {"--grace", "x", "run", "k", "--", "true"},
      {"run", "k"},
      {"run", "k", "--"},
      {"release", "k"},
      {"status", "k", "extra"},
      {"acquire", "k", "--permits", "3"},
      {"status", "k", "--period", "100"},
      {"cooldown", "k", "--period", "100", "--peek", "--reset"},
      {"cooldown", "k", "--period", "100", "--peek", "--", "true"},
      {"--wait-replicas", "1", "status", "k"},
  };
  for (const auto& c : cases) {
    Outcome o = cli(c);
    EXPECT_EQ(o.rc, 2) << "args: " << ::testing::PrintToString(c) << " err: " << o.err;
    EXPECT_EQ(o.err.rfind("edgelock: ", 0), 0u) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "one line: " << o.err;
  }
  EXPECT_EQ(cli({"--help"}).rc, 0);
  EXPECT_NE(cli({"--help"}).out.find("--tls-server-name"), std::string::npos);
  EXPECT_EQ(cli({"--version"}).out.rfind("edgelock ", 0), 0u);
}

// Several --url: a quorum lock.
TEST_F(CliTest, SeveralUrlsMakeAQuorumLock) {
  RedisServer b, c;
  ASSERT_TRUE(b.start());
  ASSERT_TRUE(c.start());
  const std::vector<std::string> urls = {"-u", b.url(), "-u", c.url()};  // + server_ via start()
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.begin(), urls.begin(), urls.end());
    return args;
  };
  Outcome a = cli(with({"-t", "5000", "acquire", "q"}));
  ASSERT_EQ(a.rc, 0) << a.err;
  std::istringstream words(a.out);
  std::string token;
  uint64_t fence = 0;
  words >> token >> fence;
  EXPECT_GT(fence, 0u);
  EXPECT_EQ(redis({"GET", "q"}), token) << "set on every server";
  EXPECT_EQ(cli(with({"status", "q"})).out.substr(0, 5), "held ");
  EXPECT_EQ(cli(with({"-w", "0", "acquire", "q"})).rc, 1);
  EXPECT_EQ(cli(with({"extend", "q", "stale"})).rc, 5);
  EXPECT_EQ(cli(with({"release", "q", token})).rc, 0);
  EXPECT_EQ(cli(with({"status", "q"})).out, "free\n");
  c.kill9();  // a minority down: still works
  Outcome r = cli(with({"-t", "600", "run", "q", "--", "sh", "-c", "sleep 1; exit 7"}));
  EXPECT_EQ(r.rc, 7) << r.err;
  b.kill9();  // a majority down
  EXPECT_EQ(cli(with({"acquire", "q"})).rc, 3);
}

TEST_F(CliTest, BadUrlExitsTwoWithoutShowingThePassword) {
  Outcome o = cli({"status", "k"}, {}, "redis://user:hunter2@127.0.0.1:99999");
  EXPECT_EQ(o.rc, 2);
  EXPECT_NE(o.err.find("bad URL"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("bad port"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("hunter2"), std::string::npos) << o.err;
  EXPECT_EQ(cli({"status", "k"}, {}, "http://127.0.0.1").rc, 2);
}

TEST_F(CliTest, UnreachableServerExitsThreeWithinConnectTimeout) {
  const int port = test::free_port();
  const std::string url = "redis://127.0.0.1:" + std::to_string(port);
  Outcome o = cli({"acquire", "k"}, {}, url);  // wait forever must not retry a dead server
  EXPECT_EQ(o.rc, 3);
  EXPECT_LT(o.ms, 2000 * slowdown()) << "connect timeout is 2 s";
  EXPECT_NE(o.err.find("cannot connect to 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << o.err;
  EXPECT_EQ(cli({"run", "k", "--", "true"}, {}, url).rc, 3);
}

TEST_F(CliTest, HungServerExitsThreeWithinCommandBudget) {
  RedisServer hung;
  ASSERT_TRUE(hung.start());
  hung.pause();  // TCP connects still succeed (kernel backlog); replies never come
  Outcome o = cli({"-t", "1000", "status", "k"}, {}, hung.url());
  hung.resume();
  EXPECT_EQ(o.rc, 3) << o.err;
  EXPECT_LT(o.ms, 2000 * slowdown()) << "command budget is TTL/4 here, connect timeout 2 s";
  EXPECT_NE(o.err.find("127.0.0.1:" + std::to_string(hung.port())), std::string::npos) << o.err;
}

TEST_F(CliTest, AuthFailuresExitThreeAndPasswordsStayHidden) {
  RedisServer guarded({"--requirepass", "s3cret"});
  ASSERT_TRUE(guarded.start());
  const std::string base = "127.0.0.1:" + std::to_string(guarded.port());
  Outcome none = cli({"status", "k"}, {}, "redis://" + base);
  EXPECT_EQ(none.rc, 3) << none.err;
  Outcome wrong = cli({"status", "k"}, {}, "redis://:wrongpass@" + base);
  EXPECT_EQ(wrong.rc, 3);
  EXPECT_EQ(wrong.err.find("wrongpass"), std::string::npos) << wrong.err;
  Outcome env = cli({"status", "k"}, {"EDGELOCK_PASSWORD=s3cret"}, "redis://" + base);
  EXPECT_EQ(env.rc, 0) << env.err;
  EXPECT_EQ(cli({"status", "k"}, {}, "redis://:s3cret@" + base).rc, 0);
}

TEST_F(CliTest, RunPropagatesStatusAndEnvironment) {
  const std::string script = "echo \"$EDGELOCK_KEY $EDGELOCK_TOKEN $EDGELOCK_FENCE\"; exit 7";
  Outcome o = cli({"run", "job", "--", "sh", "-c", script});
  EXPECT_EQ(o.rc, 7) << o.err;
  std::istringstream words(o.out);
  std::string key, token;
  uint64_t fence = 0;
  words >> key >> token >> fence;
  EXPECT_EQ(key, "job");
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(fence, 1u);
  EXPECT_EQ(redis({"EXISTS", "job"}), "0") << "released when the command exited";
  EXPECT_EQ(cli({"run", "job", "--", "sh", "-c", "kill -9 $$"}).rc, 137);
  EXPECT_EQ(cli({"run", "job", "--", "true"}).rc, 0);
  EXPECT_EQ(cli({"run", "job", "--", "/no/such/program"}).rc, 127);
  EXPECT_EQ(redis({"EXISTS", "job"}), "0");
}

TEST_F(CliTest, RunKeepsTheLeasePastItsTtl) {
  // Three TTLs long: only renewals keep it (TTL wider under emulation).
  const int ttl = 300 * std::min(slowdown(), 4);
  const std::string secs = std::to_string(3.3 * ttl / 1000.0);
  Outcome o = cli({"-t", std::to_string(ttl), "run", "job", "--", "sleep", secs});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_GE(o.ms, 3 * ttl);
  EXPECT_EQ(o.err, "") << "no loss reported";
  EXPECT_EQ(redis({"EXISTS", "job"}), "0");
}

// Deleting or overwriting the key from another client must kill COMMAND.
TEST_F(CliTest, LostLeaseKillsCommandAndExitsFour) {
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "key deleted" : "token overwritten");
    const std::string pidfile = dir_ + "/pid" + std::to_string(variant);
    const int64_t t0 = now_ms();
    const pid_t p = start({"-t", "600", "--grace", "300", "run", "dev", "--", "sh", "-c",
                           "echo $$ > " + pidfile + "; exec sleep 30"},
                          "lost");
    for (int i = 0; i < 200 && redis({"EXISTS", "dev"}) != "1"; ++i) usleep(5000);
    // COMMAND runs once it wrote its pid.
    for (int i = 0; i < 400 && slurp(pidfile).find('\n') == std::string::npos; ++i) usleep(5000);
    if (variant == 0) {
      ASSERT_EQ(redis({"DEL", "dev"}), "1");
    } else {
      ASSERT_EQ(redis({"SET", "dev", "intruder", "PX", "60000"}), "OK");
    }
    const int64_t taken = now_ms();
    Outcome o = finish(p, "lost", t0);
    EXPECT_EQ(o.rc, 4) << o.err;
    // Noticed at the next renewal (TTL/3 = 200 ms); loose bound for loaded machines.
    EXPECT_LT(now_ms() - taken, 1500 * slowdown());
    EXPECT_NE(o.err.find("lease on dev lost"), std::string::npos) << o.err;
    const pid_t child = std::atoi(slurp(pidfile).c_str());
    ASSERT_GT(child, 0);
    EXPECT_NE(kill(child, 0), 0) << "COMMAND must be gone";
    EXPECT_EQ(redis({"GET", "dev"}), variant == 0 ? "(nil)" : "intruder") << "never re-created";
    redis({"DEL", "dev"});
  }
}

TEST_F(CliTest, StubbornCommandGetsKilledAfterGrace) {
  const pid_t p = start({"-t", "600", "--grace", "300", "run", "dev", "--", "sh", "-c",
                         "trap '' TERM; while :; do sleep 0.05; done"},
                        "stubborn");
  const int64_t t0 = now_ms();
  for (int i = 0; i < 200 && redis({"EXISTS", "dev"}) != "1"; ++i) usleep(5000);
  ASSERT_EQ(redis({"DEL", "dev"}), "1");
  Outcome o = finish(p, "stubborn", t0);
  EXPECT_EQ(o.rc, 4) << o.err;
  EXPECT_GE(o.ms, 300);
  EXPECT_NE(o.err.find("SIGKILL"), std::string::npos) << o.err;
}

TEST_F(CliTest, TwoRunsOnOneKeyNeverOverlap) {
  // Each critical section: a mkdir that fails if another is inside, and
  // the fencing token appended to a log (must strictly increase).
  const std::string body = "mkdir " + dir_ + "/inside || echo overlap >> " + dir_ +
                           "/overlaps; echo $EDGELOCK_FENCE >> " + dir_ +
                           "/fences; sleep 0.05; rmdir " + dir_ + "/inside";
  const std::string loop = "for i in 1 2 3 4 5 6; do " + shell_words(wrapper_words()) + "'" + cli_ +
                           "' -u " + server_->url() + " -t 2000 run shared -- sh -c '" + body +
                           "' || exit 1; done";
  const int64_t t0 = now_ms();
  std::vector<pid_t> pids;
  for (int w = 0; w < 2; ++w) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      _exit(98);
    }
    pids.push_back(pid);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    Outcome o = finish(pids[i], "w" + std::to_string(i), t0, 20000);
    EXPECT_EQ(o.rc, 0);
  }
  EXPECT_EQ(slurp(dir_ + "/overlaps"), "");
  std::istringstream fences(slurp(dir_ + "/fences"));
  uint64_t prev = 0, f = 0;
  int n = 0;
  while (fences >> f) {
    EXPECT_GT(f, prev) << "fencing tokens must increase";
    prev = f;
    ++n;
  }
  EXPECT_EQ(n, 12);
}

// --fair: waiters queued one after another run in that order, woken by a
// --fair release; the options that do not fit are usage errors.
TEST_F(CliTest, FairRunsInArrivalOrder) {
  Outcome held = cli({"--fair", "acquire", "q"});
  ASSERT_EQ(held.rc, 0) << held.err;
  const std::string token = held.out.substr(0, held.out.find(' '));
  const int64_t t0 = now_ms();
  std::vector<pid_t> pids;
  for (int i = 1; i <= 3; ++i) {
    pids.push_back(start({"--fair", "-w", "20000", "run", "q", "--", "sh", "-c",
                          "echo " + std::to_string(i) + " >> " + dir_ + "/order"},
                         "w" + std::to_string(i)));
    // The next one starts once this one is queued (a "w:" field each).
    bool queued = false;
    for (int k = 0; k < 5000 && !queued; ++k) {
      const std::string fields = redis({"HKEYS", "{q}:queue"});
      int n = 0;
      for (size_t at = 0; (at = fields.find("w:", at)) != std::string::npos; at += 2) ++n;
      queued = n == i;
      if (!queued) usleep(2000);
    }
    ASSERT_TRUE(queued) << "waiter " << i << " never queued";
  }
  EXPECT_EQ(cli({"--fair", "release", "q", token}).rc, 0);
  for (int i = 0; i < 3; ++i) {
    Outcome o = finish(pids[i], "w" + std::to_string(i + 1), t0, 20000);
    EXPECT_EQ(o.rc, 0) << o.err;
  }
  EXPECT_EQ(slurp(dir_ + "/order"), "1\n2\n3\n");
  EXPECT_EQ(cli({"--waiter-timeout", "1000", "acquire", "q"}).rc, 2);
  EXPECT_EQ(cli({"--fair", "--waiter-timeout", "100", "acquire", "q"}).rc, 2);
  EXPECT_EQ(cli({"--fair", "-u", server_->url(), "acquire", "q"}).rc, 2);
  EXPECT_EQ(cli({"--fair", "semaphore", "--permits", "2", "s"}).rc, 2);
  Outcome busy = cli({"--fair", "-w", "0", "acquire", "q"});
  EXPECT_EQ(busy.rc, 0) << "free again: " << busy.err;
}

// The contention demo in small, with both locks: workers that hang and
// crash, 0 overlaps.
TEST_F(CliTest, DemoShowsNoOverlap) {
  const char* demo = std::getenv("EDGELOCK_DEMO");
  if (!demo || !demo[0]) GTEST_SKIP() << "the demo is not built (-Dexamples=false)";
  const std::string cmd = shell_words(wrapper_words()) + std::string(demo) + " --url " +
                          server_->url() + " --workers 4 --seconds 3 --ttl " +
                          std::to_string(500 * slowdown()) + " --hang-pct 15 --crash-pct 10 > " +
                          dir_ + "/demo.out 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string out = slurp(dir_ + "/demo.out");
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  // Both runs (Lock, then FairLock): every value of these rows is 0.
  for (const char* label : {"  overlaps (two holders at once)", "  errors "}) {
    const size_t at = out.find(label);
    ASSERT_NE(at, std::string::npos) << label << "\n" << out;
    std::istringstream values(
        out.substr(at + std::strlen(label), out.find('\n', at) - at - std::strlen(label)));
    int v = -1, columns = 0;
    while (values >> v) {
      EXPECT_EQ(v, 0) << label << "\n" << out;
      ++columns;
    }
    EXPECT_EQ(columns, 2) << label << "\n" << out;
  }
  EXPECT_NE(out.find("FairLock"), std::string::npos) << out;
}

}  // namespace
}  // namespace edgelock
