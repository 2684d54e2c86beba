// edgelock run: COMMAND runs while the lease keeper renews the lock from a
// poll() loop. SIGCHLD and the signals to forward arrive on a signalfd, so
// there is no thread and no async-signal-safety puzzle.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"

namespace cli {
namespace {

using edgelock::Deadline;
using edgelock::LeaseKeeper;
using edgelock::LeaseState;
using edgelock::Nanos;

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

[[noreturn]] void exec_child(const Options& o, const Lease& lease, const sigset_t& old_mask) {
  char token[edgelock::kMaxTokenLen + 1];
  std::snprintf(token, sizeof token, "%.*s", static_cast<int>(lease.token.size),
                reinterpret_cast<const char*>(lease.token.data));
  char fence[24];
  std::snprintf(fence, sizeof fence, "%llu", static_cast<unsigned long long>(lease.fence));
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  if (setenv("EDGELOCK_KEY", o.key, 1) != 0 || setenv("EDGELOCK_TOKEN", token, 1) != 0 ||
      setenv("EDGELOCK_FENCE", fence, 1) != 0) {
    error_line("cannot set the environment: %s", std::strerror(errno));
    _exit(126);
  }
  execvp(o.child_argv[0], o.child_argv);
  const int err = errno;
  error_line("cannot run %s: %s", o.child_argv[0], std::strerror(err));
  _exit(err == ENOENT ? 127 : 126);
}

// The exit status a shell would report for `status`.
int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct Child {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;
  bool lost = false;     // lease lost: stopping the child
  bool killed = false;   // SIGKILL sent
  Nanos kill_at = 0;
};

// Reads every pending signal: reaps the child, forwards the rest to it.
void drain_signals(int sfd, Child* child) {
  signalfd_siginfo si;
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = read(sfd, &si, sizeof si);
    if (n != static_cast<ssize_t>(sizeof si)) break;
    if (si.ssi_signo != SIGCHLD && !child->exited) kill(child->pid, static_cast<int>(si.ssi_signo));
  }
  int status = 0;
  if (!child->exited && waitpid(child->pid, &status, WNOHANG) == child->pid) {
    child->exited = true;
    child->status = status;
  }
}

void on_lost(const Options& o, const LeaseKeeper& keeper, Nanos now, Child* child) {
  child->lost = true;
  child->kill_at = now + edgelock::millis(o.grace_ms);
  const bool not_owner = keeper.last_error().code() == edgelock::ErrorCode::kNotOwner;
  error_line("lease on %s lost (%s); sending SIGTERM to %s (pid %d)", o.key,
             not_owner ? "another owner or no key on the server" : "validity ran out without renewal",
             o.child_argv[0], static_cast<int>(child->pid));
  kill(child->pid, SIGTERM);
}

// Keeps the lease until the child exits. Bounded: every iteration either
// waits in poll() until a deadline or a signal, or ends the loop.
void supervise(const Options& o, const Lease& lease, int sfd, Child* child) {
  edgelock::Clock& clock = *lease.clock;
  LeaseKeeper keeper(lease.target, clock);
  if (!keeper.start().ok()) on_lost(o, keeper, clock.now(), child);
  while (!child->exited) {
    Deadline d = keeper.next_deadline();
    if (child->lost && !child->killed) d = d.min(Deadline::at(child->kill_at));
    pollfd p{sfd, POLLIN, 0};
    if (poll(&p, 1, d.poll_timeout_ms(clock)) < 0 && errno != EINTR) {
      error_line("poll: %s", std::strerror(errno));
      if (!child->lost) on_lost(o, keeper, clock.now(), child);
    }
    drain_signals(sfd, child);
    if (child->exited) {
      // Exiting at the very moment validity ran out: COMMAND may have run
      // its last instants without the lock, so that is a loss too.
      if (!child->lost && lease.target.remaining(lease.target.lock) <= 0) {
        child->lost = true;
        error_line("lease on %s ran out as %s exited", o.key, o.child_argv[0]);
      }
      break;
    }
    if (!child->lost && keeper.service() == LeaseState::kLost) on_lost(o, keeper, clock.now(), child);
    if (child->lost && !child->killed && clock.now() >= child->kill_at) {
      notice_line(o, "%s did not stop within %lld ms; sending SIGKILL", o.child_argv[0],
                  static_cast<long long>(o.grace_ms));
      kill(child->pid, SIGKILL);
      child->killed = true;
    }
  }
  keeper.stop();
}

int finish(const Options& o, const Lease& lease, const Child& child) {
  const edgelock::Status s = lease.release(lease.target.lock);
  if (child.lost) return kExitLost;  // release above is owner-checked cleanup only
  if (!s.ok()) {
    if (s.code() == edgelock::ErrorCode::kNotOwner) {
      error_line("lease on %s was lost just before %s exited", o.key, o.child_argv[0]);
      return kExitLost;
    }
    error_line("release of %s failed: %s: %s", o.key, s.to_string(), lease.error_text(lease.target.lock));
    notice_line(o, "the lease on %s ends by itself within %lld ms", o.key, static_cast<long long>(o.ttl_ms));
  }
  return shell_status(child.status);
}

}  // namespace

int run_child(const Options& o, const Lease& lease) {
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&mask, sig);
  // Blocked before fork, so a child that exits at once is still seen.
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    error_line("signalfd: %s", std::strerror(errno));
    lease.release(lease.target.lock).ignore();
    return kExitServer;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  Child child;
  child.pid = fork();
  if (child.pid < 0) {
    error_line("fork: %s", std::strerror(errno));
    lease.release(lease.target.lock).ignore();
    close(sfd);
    return kExitServer;
  }
  if (child.pid == 0) exec_child(o, lease, old_mask);
  supervise(o, lease, sfd, &child);
  close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return finish(o, lease, child);
}

}  // namespace cli
