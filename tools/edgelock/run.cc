// edgelock run: COMMAND runs while the lease keeper renews the lock from a
// poll() loop. SIGCHLD and the signals to forward arrive on a signalfd, so
// there is no thread and no async-signal-safety puzzle.
//
// COMMAND must never outlive the lease: it runs in its own process group,
// which gets SIGTERM --grace before the local validity ends (the keeper
// reports the loss that early) and SIGKILL a small margin before it ends;
// PR_SET_PDEATHSIG kills COMMAND if edgelock itself dies.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "handles.h"
#include "report.h"

namespace cli {
namespace {

using edgelock::Deadline;
using edgelock::LeaseKeeper;
using edgelock::LeaseState;
using edgelock::Nanos;
using edgelock::TimePoint;

// SIGTSTP too: Ctrl-Z stops COMMAND, never edgelock alone (a stopped
// edgelock renews nothing and kills nothing).
const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP};

// Ignored while supervising, so that no write to a terminal or a closed
// pipe stops or ends edgelock; COMMAND gets the caller's dispositions.
const int kIgnored[] = {SIGTTOU, SIGTTIN, SIGPIPE};
struct IgnoredSignals {
  struct sigaction old[3];
  IgnoredSignals() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    for (size_t i = 0; i < 3; ++i) sigaction(kIgnored[i], &ignore, &old[i]);
  }
  void restore() const {
    for (size_t i = 0; i < 3; ++i) sigaction(kIgnored[i], &old[i], nullptr);
  }
  ~IgnoredSignals() { restore(); }
};

// The descriptors edgelock inherited (open before main()) pass on to
// COMMAND; every other one (Redis sockets, whatever a library opened) is
// closed in the child, whether or not it is close-on-exec.
constexpr int kTrackedFds = 1024;
struct InheritedFds {
  unsigned char open[kTrackedFds] = {};
  InheritedFds() {
    for (int fd = 3; fd < kTrackedFds; ++fd) open[fd] = fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
  }
};
const InheritedFds g_inherited;

// True if edgelock runs in the foreground of the terminal on stdin: then
// COMMAND's group gets the terminal, as a shell does for a job.
bool owns_terminal() { return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp(); }

// tcsetpgrp() from a background group raises SIGTTOU unless it is ignored.
void give_terminal(pid_t pgid) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGTTOU, &ignore, &old);
  tcsetpgrp(STDIN_FILENO, pgid);
  sigaction(SIGTTOU, &old, nullptr);
}

// Why COMMAND did not start, sent by the child over a close-on-exec pipe
// (end of file: it started). The parent reports it: the child's stdout
// belongs to COMMAND, and only the parent can make the --json object.
struct StartFailure {
  int env = 0;  // 1: setting the environment failed, 0: the exec did
  int err = 0;
};

[[noreturn]] void start_failed(int report_fd, int env, int code) {
  const StartFailure f{env, errno};
  if (write(report_fd, &f, sizeof f) != static_cast<ssize_t>(sizeof f)) {
    error_line("cannot run a command: %s", std::strerror(f.err));
  }
  _exit(code);
}

[[noreturn]] void exec_child(const Options& o, edgelock::Lease& lease, const sigset_t& old_mask,
                             const IgnoredSignals& ignored, pid_t parent, bool terminal,
                             int report_fd) {
  setpgid(0, 0);
  // Die with edgelock; if it is already gone, never start.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(126);
  if (terminal) give_terminal(getpid());
  close_own_fds(report_fd);
  char token[edgelock::kMaxTokenLen + 1];
  std::snprintf(token, sizeof token, "%.*s", static_cast<int>(lease.token().size),
                reinterpret_cast<const char*>(lease.token().data));
  char fence[24];
  std::snprintf(fence, sizeof fence, "%llu", static_cast<unsigned long long>(lease.fence()));
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ignored.restore();
  if (setenv("EDGELOCK_KEY", o.key, 1) != 0 || setenv("EDGELOCK_TOKEN", token, 1) != 0 ||
      setenv("EDGELOCK_FENCE", fence, 1) != 0) {
    start_failed(report_fd, 1, 126);
  }
  execvp(o.child_argv[0], o.child_argv);
  start_failed(report_fd, 0, errno == ENOENT ? 127 : 126);
}

// After COMMAND's process ended: if it never started, the failure as the
// outcome (exit 127 not found, 126 not runnable; --json gets its object).
int start_failure(const Options& o, int report_fd) {
  StartFailure f;
  if (read(report_fd, &f, sizeof f) != static_cast<ssize_t>(sizeof f)) return -1;
  if (f.env) {
    return fail("internal", 126, "cannot set the environment for %s: %s", o.child_argv[0],
                std::strerror(f.err));
  }
  return fail("internal", f.err == ENOENT ? 127 : 126, "cannot run %s: %s", o.child_argv[0],
              std::strerror(f.err));
}

// The exit status a shell would report for `status`.
int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// SIGKILL goes out this long before the local validity ends: time for
// edgelock's loop to wake up and for the kernel to deliver it.
Nanos kill_margin(const Options& o) {
  int64_t ms = o.ttl_ms / 50;
  if (ms < 5) ms = 5;
  if (ms > 50) ms = 50;
  return from_ms(ms);
}

struct Child {
  pid_t pid = -1;  // also its process group
  bool exited = false;
  int status = 0;
  bool lost = false;    // lease lost: stopping the group
  bool killed = false;  // SIGKILL sent
  TimePoint kill_at;
};

// Reads every pending signal: forwards the rest to COMMAND's group, then
// reaps COMMAND. After a loss, what COMMAND left in its group is killed
// before COMMAND is reaped (while its pid still names the group).
void drain_signals(int sfd, Child* child) {
  signalfd_siginfo si;
  for (int i = 0; i < 64; ++i) {
    const ssize_t n = read(sfd, &si, sizeof si);
    if (n != static_cast<ssize_t>(sizeof si)) break;
    if (si.ssi_signo != SIGCHLD && !child->exited)
      kill(-child->pid, static_cast<int>(si.ssi_signo));
  }
  siginfo_t info{};
  if (child->exited ||
      waitid(P_PID, static_cast<id_t>(child->pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid != child->pid) {
    return;
  }
  if (child->lost) kill(-child->pid, SIGKILL);
  int status = 0;
  if (waitpid(child->pid, &status, WNOHANG) == child->pid) {
    child->exited = true;
    child->status = status;
  }
}

// The lease is (or will be) gone: SIGTERM now, SIGKILL by `valid_end` -
// kill_margin at the latest (`valid_end`: the validity believed before
// the loss was found; a not-owner reply may come long before it).
void on_lost(const Options& o, const LeaseKeeper& keeper, TimePoint now, TimePoint valid_end,
             Child* child) {
  child->lost = true;
  kill(-child->pid, SIGTERM);  // before any write: a write may block
  const Nanos grace = from_ms(effective_grace_ms(o));
  child->kill_at = valid_end - kill_margin(o);
  if (now + grace < child->kill_at) child->kill_at = now + grace;
  const bool not_owner = keeper.last_status().code() == edgelock::ErrorCode::kNotOwner;
  fail("lost", kExitLost,
       "lease on %s lost (%s, %u renewals failed); sending SIGTERM to %s (process group %d),"
       " SIGKILL in %lld ms",
       o.key,
       not_owner ? "another owner or no key on the server" : "no renewal before the validity ends",
       keeper.stats().failures, o.child_argv[0], static_cast<int>(child->pid),
       to_ms(child->kill_at > now ? child->kill_at - now : Nanos::zero()));
}

void kill_if_due(const Options& o, edgelock::Clock& clock, Child* child) {
  if (!child->lost || child->killed || clock.now() < child->kill_at) return;
  kill(-child->pid, SIGKILL);
  child->killed = true;
  notice_line("%s did not stop in time; sent SIGKILL to its process group", o.child_argv[0]);
}

// poll()'s timeout stops while the device is suspended; a relative
// CLOCK_BOOTTIME timer does not, so a deadline that passed in a suspend
// wakes the loop at resume, not a whole timeout later. tfd < 0: none.
void arm_boottime(int tfd, Deadline d, edgelock::Clock& clock) {
  if (tfd < 0) return;
  itimerspec t{};  // zero: disarmed
  if (!d.is_never()) {
    const Nanos left = d.remaining(clock);
    const int64_t ns = left > Nanos::zero() ? left.count() : 1;
    t.it_value.tv_sec = static_cast<time_t>(ns / 1000000000);
    t.it_value.tv_nsec = static_cast<long>(ns % 1000000000);
  }
  timerfd_settime(tfd, 0, &t, nullptr);
}

// Keeps the lease until the child exits. Bounded: every iteration either
// waits in poll() until a deadline or a signal, or ends the loop.
void supervise(const Options& o, edgelock::Lease& lease, LeaseKeeper& keeper, int sfd, int tfd,
               Child* child) {
  edgelock::Clock& clock = lease.clock();
  while (!child->exited) {
    Deadline d = keeper.next_deadline();
    if (child->lost && !child->killed) d = d.min(Deadline::at(child->kill_at));
    arm_boottime(tfd, d, clock);
    pollfd p[2] = {{sfd, POLLIN, 0}, {tfd, POLLIN, 0}};
    const TimePoint valid_end = clock.now() + lease.remaining();
    const int ready = poll(p, tfd < 0 ? 1 : 2, d.poll_timeout_ms(clock));
    if (ready > 0 && (p[1].revents & POLLIN) != 0) {
      uint64_t expirations = 0;  // read only to clear it: the loop below looks at the clock
      const ssize_t n = read(tfd, &expirations, sizeof expirations);
      static_cast<void>(n);
    }
    if (ready < 0 && errno != EINTR) {
      error_line("poll: %s", std::strerror(errno));
      if (!child->lost) on_lost(o, keeper, clock.now(), valid_end, child);
    }
    drain_signals(sfd, child);
    if (child->exited) {
      // Exiting at the very moment validity ran out: COMMAND may have run
      // its last instants without the lock, so that is a loss too.
      if (!child->lost && lease.remaining() <= Nanos::zero()) {
        child->lost = true;
        fail("lost", kExitLost, "lease on %s ran out as %s exited", o.key, o.child_argv[0]);
      }
      break;
    }
    if (!child->lost && keeper.step() == LeaseState::kLost) {
      on_lost(o, keeper, clock.now(), valid_end, child);
    }
    kill_if_due(o, clock, child);
  }
  keeper.stop();
}

int finish(const Options& o, edgelock::Lease& lease, const Child& child, int report_fd) {
  const edgelock::Status s = lease.release();
  const int not_started = start_failure(o, report_fd);
  if (not_started >= 0) return not_started;
  if (child.lost) return kExitLost;  // release above is owner-checked cleanup only
  if (!s.ok()) {
    if (s.code() == edgelock::ErrorCode::kNotOwner) {
      return fail("lost", kExitLost, "lease on %s was lost just before %s exited", o.key,
                  o.child_argv[0]);
    }
    error_line("release of %s failed: %s: %s", o.key, cause_text(s), lease.last_error());
    notice_line("the lease on %s ends by itself within %lld ms", o.key,
                static_cast<long long>(o.ttl_ms));
  }
  return shell_status(child.status);
}

// Starts keeping the lease before COMMAND starts: a lease that cannot be
// kept with these options is refused rather than run unprotected.
int start_keeper(const Options& o, edgelock::Lease& lease, LeaseKeeper& keeper) {
  const edgelock::Status s = keeper.start();
  if (s.ok()) return kExitOk;
  lease.release().ignore();
  if (s.code() == edgelock::ErrorCode::kNotHeld) {
    return fail("lost", kExitLost, "lease on %s ran out before %s could start", o.key,
                o.child_argv[0]);
  }
  return fail("usage", kExitUsage,
              "--ttl %lld is too short to keep: a renewal may take %lld ms and --grace %lld ms plus"
              " %lld ms come out of the validity",
              static_cast<long long>(o.ttl_ms), to_ms(keeper.renew_budget()),
              static_cast<long long>(effective_grace_ms(o)), to_ms(kill_margin(o)));
}

int fork_and_supervise(const Options& o, edgelock::Lease& lease, LeaseKeeper& keeper, int sfd,
                       const sigset_t& old_mask) {
  const IgnoredSignals ignored;
  std::fflush(stdout);
  std::fflush(stderr);
  const bool terminal = owns_terminal();
  const pid_t parent = getpid();
  int report[2];
  Child child;
  child.pid = pipe2(report, O_CLOEXEC) == 0 ? fork() : -1;
  if (child.pid < 0) {
    const int err = errno;
    lease.release().ignore();
    return fail("internal", kExitServer, "cannot start %s: %s", o.child_argv[0],
                std::strerror(err));
  }
  if (child.pid == 0) exec_child(o, lease, old_mask, ignored, parent, terminal, report[1]);
  close(report[1]);
  setpgid(child.pid, child.pid);  // also here: no signal may miss the group
  const int tfd = timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
  supervise(o, lease, keeper, sfd, tfd, &child);
  if (tfd >= 0) close(tfd);
  if (terminal) give_terminal(getpgrp());
  const int rc = finish(o, lease, child, report[0]);
  close(report[0]);
  return rc;
}

}  // namespace

void close_own_fds(int keep) {
  for (int fd = 3; fd < kTrackedFds; ++fd) {
    if (!g_inherited.open[fd] && fd != keep) close(fd);
  }
}

int64_t effective_grace_ms(const Options& o) {
  if (o.grace_ms >= 0) return o.grace_ms;
  return o.ttl_ms / 4 < 2000 ? o.ttl_ms / 4 : 2000;
}

int run_child(const Options& o, edgelock::Lease& lease) {
  edgelock::KeeperOptions ko;
  ko.lose_before = from_ms(effective_grace_ms(o)) + kill_margin(o);
  LeaseKeeper keeper(lease, ko);
  const int started = start_keeper(o, lease, keeper);
  if (started != kExitOk) return started;
  sigset_t mask, old_mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  for (int sig : kForwarded) sigaddset(&mask, sig);
  // Blocked before fork, so a child that exits at once is still seen.
  sigprocmask(SIG_BLOCK, &mask, &old_mask);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    const int err = errno;
    lease.release().ignore();
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return fail("internal", kExitServer, "cannot start %s: signalfd: %s", o.child_argv[0],
                std::strerror(err));
  }
  const int rc = fork_and_supervise(o, lease, keeper, sfd, old_mask);
  if (o.stats) {
    std::fprintf(stderr, "edgelock: stats keeper: renewals=%u failures=%u\n",
                 keeper.stats().renewals, keeper.stats().failures);
  }
  close(sfd);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  return rc;
}

}  // namespace cli
