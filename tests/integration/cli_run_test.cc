// `edgelock run` as a supervisor that nothing may stop or end before it
// signals COMMAND: Ctrl-Z (SIGTSTP) stops COMMAND, not edgelock alone; a
// closed stderr pipe does not kill it before COMMAND is signalled; and its
// loop waits on a CLOCK_BOOTTIME timer, which a suspend does not stretch.
// Same fixture as cli_test.cc.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace edgelock {
namespace {

using namespace cli_test;  // NOLINT: the fixture and its helpers

// The state letter of /proc/PID/stat ('T': stopped), or '?' if gone.
char state_of(pid_t pid) {
  const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// COMMAND's pid, once it wrote it (bounded); 0 if it never did.
pid_t wait_pid_file(const std::string& path) {
  for (int i = 0; i < 400; ++i) {
    const std::string s = slurp(path);
    if (s.find('\n') != std::string::npos) return std::atoi(s.c_str());
    usleep(5000);
  }
  return 0;
}

// A state (bounded) of `pid` that `want` accepts.
template <class F>
char wait_state(pid_t pid, F want) {
  char s = state_of(pid);
  for (int i = 0; i < 400 && !want(s); ++i) {
    usleep(5000);
    s = state_of(pid);
  }
  return s;
}

// `run dev` with --ttl `ttl`: COMMAND writes its pid to `pidfile`, then
// sleeps.
std::vector<std::string> run_sleeper(const char* ttl, const std::string& pidfile) {
  return {"-t", ttl, "run", "dev", "--", "sh", "-c", "echo $$ > " + pidfile + "; exec sleep 30"};
}

TEST_F(CliTest, CtrlZStopsCommandNotEdgelock) {
  const std::string pidfile = dir_ + "/pid";
  const int64_t t0 = now_ms();
  const pid_t p = start(run_sleeper("2000", pidfile), "tstp");
  const pid_t child = wait_pid_file(pidfile);
  ASSERT_GT(child, 0);
  ASSERT_EQ(kill(p, SIGTSTP), 0);
  EXPECT_EQ(wait_state(child, [](char s) { return s == 'T'; }), 'T') << "COMMAND stopped";
  EXPECT_NE(state_of(p), 'T') << "edgelock stopped: nothing renews or kills any more";
  usleep(100000);
  EXPECT_EQ(redis({"EXISTS", "dev"}), "1");
  kill(-child, SIGCONT);
  ASSERT_EQ(kill(p, SIGTERM), 0);
  const Outcome o = finish(p, "tstp", t0);
  EXPECT_EQ(o.rc, 128 + SIGTERM) << o.err;
  EXPECT_EQ(redis({"EXISTS", "dev"}), "0") << "released";
}

// stderr is a pipe nobody reads any more: the loss notice cannot be
// written, and COMMAND is still signalled and the exit status is 4.
TEST_F(CliTest, LossWithAClosedStderrStillStopsCommand) {
  const std::string pidfile = dir_ + "/pid";
  int err_pipe[2];
  ASSERT_EQ(pipe(err_pipe), 0);
  std::vector<std::string> all = wrapper_words();
  all.insert(all.end(), {cli_, "-u", server_->url(), "--grace", "200"});
  for (const std::string& w : run_sleeper("600", pidfile)) all.push_back(w);
  const pid_t p = fork();
  if (p == 0) {
    dup2(err_pipe[1], STDERR_FILENO);
    close(err_pipe[0]);
    close(err_pipe[1]);
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(98);
  }
  close(err_pipe[1]);
  const pid_t child = wait_pid_file(pidfile);
  close(err_pipe[0]);  // nobody reads edgelock's stderr from here on
  ASSERT_GT(child, 0);
  ASSERT_EQ(redis({"DEL", "dev"}), "1");
  const Outcome o = finish(p, "closed-stderr", now_ms());
  EXPECT_EQ(o.rc, 4) << "a write to the closed pipe ended edgelock";
  EXPECT_EQ(wait_state(child, [](char s) { return s == '?' || s == 'Z'; }), '?')
      << "COMMAND ran on";
}

// The loop's deadlines are kept by a CLOCK_BOOTTIME timer (clockid 7),
// armed while COMMAND runs: poll()'s own timeout would not count a suspend.
TEST_F(CliTest, RunWaitsOnABoottimeTimer) {
  const std::string pidfile = dir_ + "/pid";
  const int64_t t0 = now_ms();
  const pid_t p = start(run_sleeper("3000", pidfile), "timer");
  ASSERT_GT(wait_pid_file(pidfile), 0);
  const std::string fds = "/proc/" + std::to_string(p) + "/fd";
  std::string info;
  DIR* d = opendir(fds.c_str());
  ASSERT_NE(d, nullptr);
  for (dirent* e = readdir(d); e; e = readdir(d)) {
    char target[64] = {};
    if (readlink((fds + "/" + e->d_name).c_str(), target, sizeof target - 1) < 0) continue;
    if (std::string(target).find("timerfd") == std::string::npos) continue;
    info = slurp("/proc/" + std::to_string(p) + "/fdinfo/" + e->d_name);
  }
  closedir(d);
  EXPECT_NE(info.find("clockid: 7"), std::string::npos) << "no CLOCK_BOOTTIME timer: " << info;
  EXPECT_EQ(info.find("it_value: (0, 0)"), std::string::npos) << "not armed: " << info;
  ASSERT_EQ(kill(p, SIGTERM), 0);
  EXPECT_EQ(finish(p, "timer", t0).rc, 128 + SIGTERM);
}

}  // namespace
}  // namespace edgelock
