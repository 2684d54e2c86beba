// Clock steps: the client under libfaketime with the wall clock
// moved by -1 day, +1 day, +56 years and a schedule that jumps between them
// every 40 ms while operations run. libfaketime fakes CLOCK_MONOTONIC too
// unless FAKETIME_DONT_FAKE_MONOTONIC=1; a real gateway's NTP step moves
// only the wall clock, so that is the case tested (plus one constant offset
// on both clocks, which must not matter either).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <glob.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/redis_server.h"

namespace edgelock {
namespace {

using Env = std::vector<std::pair<std::string, std::string>>;
using Figures = std::map<std::string, long long>;

std::string find_libfaketime() {
  glob_t g{};
  std::string found;
  if (glob("/usr/lib/*/faketime/libfaketime.so.1", 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    found = g.gl_pathv[0];
  } else if (access("/usr/lib/faketime/libfaketime.so.1", R_OK) == 0) {
    found = "/usr/lib/faketime/libfaketime.so.1";
  }
  globfree(&g);
  return found;
}

// Runs the probe with `env` added; returns its exit status (-1 on timeout)
// and its stdout in `out`. Bounded: 20 s.
// EDGELOCK_CLOCK_PROBE (set by meson), else clock_probe next to this test.
std::string probe_path() {
  if (const char* p = std::getenv("EDGELOCK_CLOCK_PROBE")) return p;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
  dir = dir.substr(0, dir.rfind('/') + 1);
  return dir + "clock_probe";
}

int run_probe(const std::string& url, const Env& env, std::string* out) {
  const std::string probe_s = probe_path();
  const char* probe = probe_s.c_str();
  char path[] = "/tmp/edgelock-probe-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return -2;
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& kv : env) setenv(kv.first.c_str(), kv.second.c_str(), 1);
    dup2(fd, 1);
    execl(probe, probe, url.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fd);
  int status = -1;
  for (int i = 0; i < 2000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    usleep(10000);
    if (i == 1999) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      status = -1;
    }
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  unlink(path);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Figures parse(const std::string& out) {
  Figures f;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) f[word.substr(0, eq)] = std::atoll(word.c_str() + eq + 1);
  }
  return f;
}

TEST(ClockSteps, WallClockJumpsChangeNothing) {
  const std::string lib = find_libfaketime();
  if (lib.empty()) GTEST_SKIP() << "libfaketime not installed (apt-get install libfaketime)";
  ASSERT_EQ(access(probe_path().c_str(), X_OK), 0) << "no clock_probe at " << probe_path();
  test::RedisServer s;
  ASSERT_TRUE(s.start());
  char stepfile[] = "/tmp/edgelock-faketime-XXXXXX";
  const int sfd = mkstemp(stepfile);
  ASSERT_GE(sfd, 0);
  close(sfd);
  const Env real_wall = {{"LD_PRELOAD", lib}, {"FAKETIME_DONT_FAKE_MONOTONIC", "1"}};
  struct Case {
    const char* name;
    Env env;
    long long wall_offset_s;  // expected fake wall - real wall
  };
  std::vector<Case> cases = {
      {"baseline", {}, 0},
      {"-1d", real_wall, -86400},
      {"+1d", real_wall, 86400},
      {"+56y", real_wall, 56LL * 365 * 86400},
      {"jumping", real_wall, 0},
      {"+56y_mono_too", {{"LD_PRELOAD", lib}, {"FAKETIME", "+56y"}}, 56LL * 365 * 86400},
  };
  for (auto& c : cases) {
    if (c.wall_offset_s != 0 && c.env.size() == 2 && c.env[1].first != "FAKETIME") {
      c.env.push_back({"FAKETIME", c.name});
    }
  }
  cases[4].env.push_back({"FAKETIME_TIMESTAMP_FILE", stepfile});
  cases[4].env.push_back({"FAKETIME_NO_CACHE", "1"});
  cases[4].env.push_back({"EDGELOCK_FAKETIME_FILE", stepfile});
  { std::ofstream(stepfile) << "+0\n"; }
  Figures base;
  long long probe_failures = 0;
  long long max_validity_diff = 0, max_wait_diff = 0, max_handover_diff = 0;
  for (const auto& c : cases) {
    std::string out;
    const long long before = static_cast<long long>(time(nullptr));
    const int rc = run_probe(s.url(), c.env, &out);
    const long long after = static_cast<long long>(time(nullptr));
    EXPECT_EQ(rc, 0) << c.name << ": " << out;
    const Figures f = parse(out);
    ASSERT_TRUE(f.count("validity0")) << c.name << ": " << out;
    // The wall clock really was moved (the probe's time() vs ours).
    probe_failures += f.count("failures") ? f.at("failures") : 1;
    if (c.env.size() > 4) {  // jumping: saw both a day back and 56 years ahead
      EXPECT_LE(f.at("min_wall"), before - 86000) << out;
      EXPECT_GE(f.at("max_wall"), before + 55LL * 365 * 86400) << out;
    } else {
      const long long wtol = 600 + std::llabs(c.wall_offset_s) / 1000;
      EXPECT_GE(f.at("wall"), before + c.wall_offset_s - wtol) << c.name;
      EXPECT_LE(f.at("wall"), after + c.wall_offset_s + wtol) << c.name;
    }
    if (base.empty()) {
      base = f;
      continue;
    }
    max_validity_diff =
        std::max({max_validity_diff, std::llabs(f.at("validity0") - base.at("validity0")),
                  std::llabs(f.at("validity2") - base.at("validity2")),
                  std::llabs(f.at("held") - base.at("held"))});
    max_wait_diff = std::max(max_wait_diff, std::llabs(f.at("busy_wait") - base.at("busy_wait")));
    max_handover_diff =
        std::max(max_handover_diff, std::llabs(f.at("handover") - base.at("handover")));
    EXPECT_EQ(f.at("renewals"), base.at("renewals")) << c.name;
  }
  unlink(stepfile);
  const long long tol = 50LL * test::slowdown();
  EXPECT_LE(max_validity_diff, tol);
  EXPECT_LE(max_wait_diff, tol + 100);  // BLPOP timeouts: server hz 10
  EXPECT_LE(max_handover_diff, tol);
  std::printf(
      "clock_steps: %zu runs (baseline, -1d, +1d, +56y, jumping -1d/+1d/+56y/+0 every "
      "40 ms, +56y incl. monotonic), %lld out of bounds; vs baseline: validity/held max "
      "diff %lld ms, busy wait %lld ms, handover %lld ms, keeper renewals %lld\n",
      cases.size(), probe_failures, max_validity_diff, max_wait_diff, max_handover_diff,
      base.count("renewals") ? base.at("renewals") : -1);
}

}  // namespace
}  // namespace edgelock
