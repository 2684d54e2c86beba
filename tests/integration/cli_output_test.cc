// The edgelock tool's output and inputs: -q keeps results,
// -w forever, JSON error objects, --version, the URL and the password from
// the environment. Same fixture as cli_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers

// -q silences notices, never a result a later command needs.
TEST_F(CliTest, QuietKeepsTheToken) {
  Outcome a = cli({"-q", "acquire", "modem"});
  ASSERT_EQ(a.rc, 0) << a.err;
  std::istringstream words(a.out);
  std::string token;
  uint64_t fence = 0;
  words >> token >> fence;
  EXPECT_EQ(token, redis({"GET", "modem"}));
  EXPECT_EQ(fence, 1u);
  EXPECT_EQ(a.err, "");
  Outcome busy = cli({"-q", "-w", "0", "acquire", "modem"});
  EXPECT_EQ(busy.rc, 1);
  EXPECT_EQ(busy.err, "") << "busy is an answer, not an error: -q silences it";
  Outcome bad = cli({"-q", "release", "modem", "stale"});
  EXPECT_EQ(bad.rc, 5);
  EXPECT_NE(bad.err.find("not the owner"), std::string::npos) << "errors still print: " << bad.err;
  EXPECT_EQ(cli({"-q", "release", "modem", token}).rc, 0);
}

// -w forever (or -1) is the default, said explicitly.
TEST_F(CliTest, WaitForeverCanBeSpelledOut) {
  for (const char* forever : {"forever", "-1"}) {
    ASSERT_EQ(redis({"SET", "modem", "someone", "PX", "300"}), "OK");
    Outcome o = cli({"-w", forever, "acquire", "modem"});
    EXPECT_EQ(o.rc, 0) << forever << ": " << o.err;
    EXPECT_GE(o.ms, 200) << "waited for the holder";
    ASSERT_EQ(redis({"DEL", "modem"}), "1");
  }
  EXPECT_EQ(cli({"-w", "-2", "acquire", "modem"}).rc, 2);
  EXPECT_EQ(cli({"-w", "never", "acquire", "modem"}).rc, 2);
}

// --json: one object per result and per error, each with "exit"; errors
// carry "error" (a name from the table in docs/cli.md) and "message".
TEST_F(CliTest, JsonReportsErrorsToo) {
  struct Case {
    std::vector<std::string> args;
    std::string url;
    int rc;
    std::string error;
  };
  ASSERT_EQ(redis({"SET", "held", "someone", "PX", "60000"}), "OK");
  const std::string dead = "redis://127.0.0.1:" + std::to_string(test::free_port());
  const std::vector<Case> cases = {
      {{"-w", "0", "acquire", "held"}, "", 1, "busy"},
      {{"-t", "zero", "acquire", "k"}, "", 2, "usage"},
      {{"--no-such-option", "status", "k"}, "", 2, "usage"},
      {{"status", "k"}, "redis://127.0.0.1:99999", 2, "usage"},
      {{"status", "k"}, dead, 3, "connect"},
      {{"release", "held", "stale"}, "", 5, "not_owner"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Outcome o = cli(args, {}, c.url);
    EXPECT_EQ(o.rc, c.rc) << ::testing::PrintToString(c.args) << ": " << o.err;
    EXPECT_EQ(
        o.out.rfind("{\"error\":\"" + c.error + "\",\"exit\":" + std::to_string(c.rc) + ",", 0), 0u)
        << o.out;
    EXPECT_NE(o.out.find("\"message\":\""), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one object, one line: " << o.out;
  }
  Outcome ok = cli({"--json", "status", "held"});
  EXPECT_NE(ok.out.find("\"exit\":0}"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("error"), std::string::npos) << ok.out;
}

TEST_F(CliTest, VersionNamesTheBuild) {
  Outcome v = cli({"--version"});
  EXPECT_EQ(v.rc, 0);
  for (const char* what : {"edgelock 0.", "hiredis ", "mbedTLS ", "TLS o", "max_key_len=",
                           "tx_buffer_size=", "rx_buffer_size=", "max_cluster_nodes=",
                           "max_quorum_servers=", "redis-sentinel://", "redis-cluster://"}) {
    EXPECT_NE(v.out.find(what), std::string::npos) << what << " in " << v.out;
  }
}

// The URL and the password can come from the environment (systemd
// EnvironmentFile=), never needing the command line.
TEST_F(CliTest, UrlAndPasswordFromTheEnvironment) {
  RedisServer guarded({"--requirepass", "s3cret"});
  ASSERT_TRUE(guarded.start());
  const std::string url = "redis://127.0.0.1:" + std::to_string(guarded.port());
  auto bare = [&](const Env& env) {
    const std::string cmd = "env " +
                            [&] {
                              std::string e;
                              for (const std::string& v : env) e += "'" + v + "' ";
                              return e;
                            }() +
                            shell_words(wrapper_words()) + "'" + cli_ + "' status k > " + dir_ +
                            "/env.out 2>&1";
    return std::system(cmd.c_str());
  };
  EXPECT_EQ(WEXITSTATUS(bare({"EDGELOCK_URL=" + url, "EDGELOCK_PASSWORD=s3cret"})), 0)
      << slurp(dir_ + "/env.out");
  EXPECT_EQ(slurp(dir_ + "/env.out"), "free\n");
  EXPECT_EQ(WEXITSTATUS(bare({"EDGELOCK_URL=" + url, "REDISCLI_AUTH=s3cret"})), 0)
      << slurp(dir_ + "/env.out");
  EXPECT_EQ(WEXITSTATUS(bare({"EDGELOCK_URL=" + url, "REDISCLI_AUTH=wrong"})), 3)
      << slurp(dir_ + "/env.out");
  EXPECT_EQ(slurp(dir_ + "/env.out").find("wrong"), std::string::npos)
      << "passwords are never printed";
}

}  // namespace
}  // namespace edgelock
