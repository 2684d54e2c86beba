// The `edgelock` tool's caller errors: what the caller supplied (URL,
// options, files) is refused with exit 2 and a line naming the cause, and a
// password never shows in any of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "../integration/cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliUsage : public CliTest {
 protected:
  std::string port() { return std::to_string(server_->port()); }
};

// Generated secrets hold unencoded '/', '@', '#' and ':'; a parser splits
// such a URL in the wrong place, so no part of the password may be echoed,
// on stderr or in the JSON message. Each secret has two markers (Zq, Rk)
// that appear nowhere else.
TEST_F(CliUsage, BadUrlNeverShowsAnyPartOfThePassword) {
  const std::vector<std::string> urls = {
      "redis://:hunZq2/xyRk@127.0.0.1:" + port(), "redis://:p@sZq:w/rRk#1@127.0.0.1:" + port(),
      "redis://user:Zq#Rk@127.0.0.1:99999",       "redis://user:Zq?Rk@127.0.0.1:" + port(),
      "rediss://u:Zq:Rk/x@127.0.0.1:" + port(),   "redis-sentinel://:Zq/Rk@127.0.0.1:1/gw",
      "redis-cluster://u:Zq/Rk@127.0.0.1:1",      "http://u:Zq/Rk@127.0.0.1:1",
  };
  for (const std::string& url : urls) {
    for (const bool json : {false, true}) {
      std::vector<std::string> args = {"status", "k"};
      if (json) args.insert(args.begin(), "--json");
      const Outcome o = cli(args, {}, url);
      EXPECT_EQ(o.rc, 2) << url << ": " << o.err;
      EXPECT_TRUE(has(o.err, "bad URL")) << url << ": " << o.err;
      EXPECT_TRUE(has(o.err, "***@127.0.0.1")) << url << ": " << o.err;
      for (const char* marker : {"Zq", "Rk"}) {
        EXPECT_FALSE(has(o.err, marker)) << url << ": " << o.err;
        EXPECT_FALSE(has(o.out, marker)) << url << ": " << o.out;
      }
      if (json) {
        EXPECT_TRUE(has(o.out, "\"error\":\"usage\"")) << url << ": " << o.out;
      }
    }
  }
  // A password that split the URL gets the hint to encode it.
  const Outcome hint = cli({"status", "k"}, {}, urls[0]);
  EXPECT_TRUE(has(hint.err, "percent-encode")) << hint.err;
}

// An option of another subcommand is a usage error, not silently ignored.
TEST_F(CliUsage, GraceBelongsToRunAndSemaphore) {
  const std::vector<std::vector<std::string>> refused = {
      {"--grace", "100", "acquire", "k"},
      {"--grace", "100", "status", "k"},
      {"--grace", "100", "release", "k", "token"},
      {"--grace", "100", "extend", "k", "token"},
      {"--grace", "100", "cooldown", "c", "--period", "100"},
  };
  for (const auto& args : refused) {
    const Outcome o = cli(args);
    EXPECT_EQ(o.rc, 2) << args[2] << ": " << o.err;
    EXPECT_TRUE(has(o.err, "--grace")) << args[2] << ": " << o.err;
  }
  EXPECT_EQ(redis({"EXISTS", "k"}), "0") << "a refused acquire takes nothing";
  const Outcome run = cli({"--grace", "100", "run", "k", "--", "true"});
  EXPECT_EQ(run.rc, 0) << run.err;
  const Outcome sem = cli({"--grace", "100", "semaphore", "s", "--permits", "1", "--", "true"});
  EXPECT_EQ(sem.rc, 0) << sem.err;
}

// The unknown-scheme line lists every scheme the tool takes.
TEST_F(CliUsage, UnknownSchemeListsEveryScheme) {
  for (const std::string url : {"http://127.0.0.1:1", "127.0.0.1:6379", "redis:/127.0.0.1"}) {
    const Outcome o = cli({"status", "k"}, {}, url);
    EXPECT_EQ(o.rc, 2) << url << ": " << o.err;
    for (const char* scheme :
         {"redis://", "rediss://", "unix://", "redis-sentinel://", "redis-cluster://"}) {
      EXPECT_TRUE(has(o.err, scheme)) << url << ": " << o.err;
    }
  }
}

// What the caller got wrong in a URL or a file name is exit 2 (usage), not
// a server or TLS failure (exit 3).
TEST_F(CliUsage, CallerMistakesExitTwo) {
  const Outcome db = cli({"--json", "status", "k"}, {}, "redis://127.0.0.1:" + port() + "/99999");
  EXPECT_EQ(db.rc, 2) << db.err;
  EXPECT_TRUE(has(db.err, "database 99999")) << db.err;
  EXPECT_TRUE(has(db.out, "\"error\":\"usage\",\"exit\":2")) << db.out;
  const Outcome ca = cli({"--tls-ca", dir_ + "/nonexistent.pem", "status", "k"}, {},
                         "rediss://127.0.0.1:" + port());
  EXPECT_EQ(ca.rc, 2) << ca.err;
  EXPECT_TRUE(has(ca.err, "--tls-ca")) << ca.err;
  const Outcome key = cli({"--tls-cert", dir_ + "/c.pem", "--tls-key", dir_ + "/k.pem", "-u",
                           "redis://127.0.0.1:" + port(), "status", "k"});
  EXPECT_EQ(key.rc, 2) << "a quorum's files are checked too: " << key.err;
  const Outcome space = cli({"status", "k"}, {}, "redis://127.0.0.1 :" + port());
  EXPECT_EQ(space.rc, 2) << space.err;
  EXPECT_TRUE(has(space.err, "space")) << space.err;
  // The same server with a database it has, and no stray blank: fine.
  EXPECT_EQ(cli({"status", "k"}, {}, "redis://127.0.0.1:" + port() + "/15").rc, 0);
}

// A COMMAND that cannot be run: exit 127 (not found) or 126 (not runnable),
// as a shell says, and with --json one object of kind "internal" carrying
// that exit; no "allowed ... exit 0" object before it. A COMMAND that runs
// and exits 127 itself is just its status, with no object.
TEST_F(CliUsage, CommandThatCannotRunIsReportedWithItsExit) {
  const std::string missing = dir_ + "/nonexistent";
  const std::string not_runnable = dir_ + "/plain-file";
  ASSERT_EQ(std::system(("touch '" + not_runnable + "'").c_str()), 0);
  const struct {
    std::vector<std::string> args;
    int rc;
  } cases[] = {
      {{"run", "k", "--", missing}, 127},
      {{"run", "k", "--", not_runnable}, 126},
      {{"semaphore", "s", "--permits", "2", "--", missing}, 127},
      {{"cooldown", "c", "--period", "60000", "--", missing}, 127},
      {{"cooldown", "q", "--quota", "5", "--window", "60000", "--", not_runnable}, 126},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.insert(args.begin(), "--json");
    const Outcome o = cli(args);
    const std::string what = args[1] + " " + args.back() + ": ";
    EXPECT_EQ(o.rc, c.rc) << what << o.err;
    EXPECT_EQ(o.out, "{\"error\":\"internal\",\"exit\":" + std::to_string(c.rc) + ",\"key\":\"" +
                         args[2] + "\",\"message\":\"cannot run " + args.back() + ": " +
                         (c.rc == 127 ? "No such file or directory" : "Permission denied") +
                         "\"}\n")
        << what;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << what << o.err;
    EXPECT_TRUE(has(o.err, "cannot run")) << what << o.err;
  }
  EXPECT_EQ(redis({"EXISTS", "k"}), "0") << "the lock is released";
  const Outcome own = cli({"--json", "run", "k", "--", "sh", "-c", "exit 127"});
  EXPECT_EQ(own.rc, 127) << own.err;
  EXPECT_EQ(own.out, "") << "COMMAND ran to its end: stdout is its own";
}

// -E/--conflict-exit-code (flock's -E): "busy" exits with N, so it cannot
// be mistaken for COMMAND's own 1 or 3; COMMAND's status is untouched, and
// the JSON object carries the same exit.
TEST_F(CliUsage, ConflictExitCodeSeparatesBusyFromCommand) {
  ASSERT_EQ(redis({"SET", "held", "someone", "PX", "60000"}), "OK");
  const Outcome busy = cli({"-w", "0", "-E", "75", "run", "held", "--", "true"});
  EXPECT_EQ(busy.rc, 75) << busy.err;
  EXPECT_TRUE(has(busy.err, "held by another owner")) << busy.err;
  const Outcome json =
      cli({"--json", "-w", "0", "--conflict-exit-code", "75", "run", "held", "--", "true"});
  EXPECT_EQ(json.rc, 75) << json.err;
  EXPECT_TRUE(has(json.out, "{\"error\":\"busy\",\"exit\":75,")) << json.out;
  const Outcome waited = cli({"-w", "100", "-E", "75", "run", "held", "--", "true"});
  EXPECT_EQ(waited.rc, 75) << "a --wait that ran out: " << waited.err;
  const Outcome own = cli({"-w", "0", "-E", "75", "run", "free", "--", "sh", "-c", "exit 1"});
  EXPECT_EQ(own.rc, 1) << "COMMAND's own status: " << own.err;
  const Outcome c1 = cli({"-E", "42", "cooldown", "cc", "--period", "60000", "--", "true"});
  EXPECT_EQ(c1.rc, 0) << c1.err;
  const Outcome c2 = cli({"-E", "42", "cooldown", "cc", "--period", "60000", "--", "true"});
  EXPECT_EQ(c2.rc, 42) << "not allowed: " << c2.err;
  ASSERT_EQ(cli({"-t", "60000", "semaphore", "pool", "--permits", "1"}).rc, 0);
  const Outcome sem =
      cli({"-w", "0", "-E", "43", "semaphore", "pool", "--permits", "1", "--", "true"});
  EXPECT_EQ(sem.rc, 43) << "no permit: " << sem.err;
  // Without COMMAND there is nothing to tell apart: a usage error.
  EXPECT_EQ(cli({"-E", "75", "-w", "0", "acquire", "held"}).rc, 2);
  EXPECT_EQ(cli({"-E", "256", "run", "k", "--", "true"}).rc, 2);
}

}  // namespace
}  // namespace edgelock
