#pragma once
// The fixture for running the edgelock tool end to end against a real
// redis-server (cli_test.cc, cli_primitives_test.cc, ...). The tool's path comes
// from EDGELOCK_CLI (set by tests/meson.build).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/redis_server.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace cli_test {

using test::RedisServer;
using test::slowdown;
using Env = std::vector<std::string>;

struct Outcome {
  int rc = -1;
  std::string out, err;
  int64_t ms = 0;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Cross builds run the tool under the exe wrapper (qemu-user): its words
// are in the file EDGELOCK_CLI_WRAPPER_FILE names (space-separated).
inline std::vector<std::string> wrapper_words() {
  std::vector<std::string> words;
  const char* file = std::getenv("EDGELOCK_CLI_WRAPPER_FILE");
  if (!file || !file[0]) return words;
  std::istringstream in(slurp(file));
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// `words` as one shell command line, each word single-quoted.
inline std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += "'" + w + "' ";
  return out;
}

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CliTest : public test::SuiteServerTest {
 public:
  // cli() for helpers outside the fixture.
  Outcome run_cli(const std::vector<std::string>& args, const Env& env = {},
                  const std::string& url = "") {
    return cli(args, env, url);
  }

 protected:
  void SetUp() override {
    const char* cli = std::getenv("EDGELOCK_CLI");
    ASSERT_TRUE(cli && cli[0]) << "EDGELOCK_CLI must name the built tool";
    cli_ = cli;
    char tmpl[] = "/tmp/edgelock-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(test::open(admin_, server_->url()));
    ASSERT_EQ(test::run(admin_, {"FLUSHALL"}), "OK");
  }
  void TearDown() override {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "cannot remove " << dir_;
  }

  // Starts the tool with `args` (URL first unless `url` is empty).
  pid_t start(const std::vector<std::string>& args, const std::string& tag, const Env& env = {},
              const std::string& url = "") {
    std::vector<std::string> all = wrapper_words();
    all.insert(all.end(), {cli_, "-u", url.empty() ? server_->url() : url});
    all.insert(all.end(), args.begin(), args.end());
    const pid_t pid = fork();
    if (pid == 0) {
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      if (!freopen((dir_ + "/" + tag + ".out").c_str(), "w", stdout)) _exit(99);
      if (!freopen((dir_ + "/" + tag + ".err").c_str(), "w", stderr)) _exit(99);
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(98);
    }
    return pid;
  }
  // Waits (bounded) for a started tool; kills it if it overruns.
  Outcome finish(pid_t pid, const std::string& tag, int64_t started, int64_t limit_ms = 10000) {
    Outcome o;
    int status = 0;
    const int64_t end = started + limit_ms * slowdown();
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (now_ms() > end) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "edgelock overran " << limit_ms << " ms";
        break;
      }
      usleep(2000);
    }
    o.ms = now_ms() - started;
    o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o.out = slurp(dir_ + "/" + tag + ".out");
    o.err = slurp(dir_ + "/" + tag + ".err");
    return o;
  }
  Outcome cli(const std::vector<std::string>& args, const Env& env = {},
              const std::string& url = "") {
    const int64_t t0 = now_ms();
    return finish(start(args, "one", env, url), "one", t0);
  }
  std::string redis(std::initializer_list<std::string> args) { return test::run(admin_, args); }

  std::string cli_, dir_;
  Connection admin_;
};
}  // namespace cli_test
}  // namespace edgelock
