// edgelock: command-line parsing and --help.
#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"

#ifndef EDGELOCK_VERSION
#define EDGELOCK_VERSION "unknown"
#endif

namespace cli {

namespace {

// --wait: the longest wait a Nanos can hold, in ms.
constexpr int64_t kMaxWaitMs = std::chrono::duration_cast<edgelock::Millis>(edgelock::Nanos::max()).count();

const char kUsage[] =
    "Usage: edgelock [OPTIONS] run KEY -- COMMAND [ARG...]\n"
    "       edgelock [OPTIONS] acquire KEY\n"
    "       edgelock [OPTIONS] release KEY TOKEN\n"
    "       edgelock [OPTIONS] extend KEY TOKEN\n"
    "       edgelock [OPTIONS] status KEY\n"
    "       edgelock [OPTIONS] semaphore KEY --permits N [-- COMMAND [ARG...]]\n"
    "       edgelock [OPTIONS] semaphore KEY --permits N --count | --release ID\n"
    "       edgelock [OPTIONS] cooldown KEY --period MS [-- COMMAND [ARG...]]\n"
    "       edgelock [OPTIONS] cooldown KEY --quota M --window MS [-- COMMAND...]\n"
    "\n"
    "A Redis lock from the shell: run a command only while holding KEY.\n"
    "\n"
    "Subcommands:\n"
    "  run      acquire KEY, keep it renewed (every TTL/3) while COMMAND runs,\n"
    "           release it when COMMAND exits and exit with COMMAND's status.\n"
    "           COMMAND gets EDGELOCK_KEY, EDGELOCK_TOKEN and EDGELOCK_FENCE.\n"
    "           COMMAND runs in its own process group. If renewals fail, the\n"
    "           group gets SIGTERM --grace before the lease's local validity\n"
    "           ends and SIGKILL just before it ends; edgelock exits 4.\n"
    "  acquire  acquire KEY and print \"TOKEN FENCE\"; the lease expires after\n"
    "           the TTL unless released or extended.\n"
    "  release  release KEY if TOKEN still owns it.\n"
    "  extend   reset KEY's TTL to --ttl if TOKEN still owns it.\n"
    "  status   print \"held TTL_MS\" or \"free\" for KEY.\n"
    "  semaphore  take one of N expiring permits (each lives --ttl). With\n"
    "           COMMAND: as run (permit renewed, released after, exit 4 if lost;\n"
    "           EDGELOCK_TOKEN is the permit id). Without: print the permit id.\n"
    "           --count prints the permits in use; --release ID returns one.\n"
    "           Every user of KEY must pass the same --permits.\n"
    "  cooldown at most once per --period (or --quota M per --window MS). If\n"
    "           allowed, exec COMMAND (or print \"allowed\"); if not, print\n"
    "           \"retry-after MS\" and exit 1. Waits only if --wait is given.\n"
    "\n"
    "Options:\n"
    "  -u, --url URL          Redis server: redis://[[user]:password@]host[:port][/db],\n"
    "                         rediss://... (TLS) or unix:///path. Repeat for a quorum\n"
    "                         lock over independent servers. Default: $EDGELOCK_URL,\n"
    "                         else redis://127.0.0.1:6379.\n"
    "  -t, --ttl MS           lease length in milliseconds (default 10000).\n"
    "      --server-wait MS   give up (exit 3) once the server has given no usable\n"
    "                         answer for MS (timeouts, failed connects, grants too\n"
    "                         late), even within --wait (default 10000).\n"
    "  -w, --wait MS          how long to wait for the lock; 0 = fail at once if it\n"
    "                         is held (like flock -n). Default: wait forever.\n"
    "      --grace MS         run: time between SIGTERM and SIGKILL, taken out of\n"
    "                         the lease (at most TTL/2; default min(2000, TTL/4)).\n"
    "      --tls-ca FILE      CA certificate(s) to verify the server (PEM).\n"
    "      --tls-cert FILE    client certificate for mutual TLS (PEM).\n"
    "      --tls-key FILE     client key for mutual TLS (PEM).\n"
    "      --tls-server-name NAME  name to verify instead of the URL's host.\n"
    "      --json             one JSON object per result on stdout (key, token,\n"
    "                         fence, ttl_ms, validity_ms, held).\n"
    "      --stats            at exit, print the connection's and the handle's\n"
    "                         counters (attempts, grants, busy, ...) to stderr.\n"
    "      --permits N        semaphore: N permits (required).\n"
    "      --count            semaphore: print the permits in use.\n"
    "      --release ID       semaphore: return the permit ID.\n"
    "      --period MS        cooldown: the period.\n"
    "      --quota M, --window MS  cooldown: at most M times per window instead.\n"
    "  -q, --quiet            print no results and no notices (errors still go\n"
    "                         to stderr).\n"
    "  -h, --help             show this help.\n"
    "      --version          show the version.\n"
    "\n"
    "Environment: EDGELOCK_URL (default URL), EDGELOCK_PASSWORD (used when the URL\n"
    "has none; passwords are never printed).\n"
    "\n"
    "Exit status: 0 success; 1 not acquired within --wait (busy), or cooldown\n"
    "not allowed; 2 usage or invalid argument; 3 connection, authentication, TLS\n"
    "or server error, no answer within --server-wait, a reply too large, a grant\n"
    "too late to use; 4 lease (or permit) lost during run/semaphore; 5 not the\n"
    "owner (stale token or permit id). With COMMAND, otherwise COMMAND's own\n"
    "status (128+N if it died of signal N, 127 if not found).\n";

enum LongOnly {
  kGrace = 256, kTlsCa, kTlsCert, kTlsKey, kTlsServerName, kJson, kVersion,
  kStats, kPermits, kCount, kReleaseId, kPeriod, kQuota, kWindow, kServerWait,
};

const option kLongOptions[] = {
    {"url", required_argument, nullptr, 'u'},
    {"ttl", required_argument, nullptr, 't'},
    {"wait", required_argument, nullptr, 'w'},
    {"grace", required_argument, nullptr, kGrace},
    {"tls-ca", required_argument, nullptr, kTlsCa},
    {"tls-cert", required_argument, nullptr, kTlsCert},
    {"tls-key", required_argument, nullptr, kTlsKey},
    {"tls-server-name", required_argument, nullptr, kTlsServerName},
    {"json", no_argument, nullptr, kJson},
    {"quiet", no_argument, nullptr, 'q'},
    {"help", no_argument, nullptr, 'h'},
    {"version", no_argument, nullptr, kVersion},
    {"stats", no_argument, nullptr, kStats},
    {"permits", required_argument, nullptr, kPermits},
    {"count", no_argument, nullptr, kCount},
    {"release", required_argument, nullptr, kReleaseId},
    {"period", required_argument, nullptr, kPeriod},
    {"quota", required_argument, nullptr, kQuota},
    {"window", required_argument, nullptr, kWindow},
    {"server-wait", required_argument, nullptr, kServerWait},
    {nullptr, 0, nullptr, 0},
};

// Parses a whole decimal string in [lo, hi]; `what` names the unit.
bool parse_in(const char* name, const char* what, const char* text, int64_t lo, int64_t hi,
              int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    error_line("%s wants %s in %lld..%lld, got '%s'", name, what, static_cast<long long>(lo),
               static_cast<long long>(hi), text);
    return false;
  }
  *out = v;
  return true;
}

bool parse_ms(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out) {
  return parse_in(name, "a number of milliseconds", text, lo, hi, out);
}

bool parse_num(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out) {
  return parse_in(name, "a number", text, lo, hi, out);
}

// Applies one option; false on a usage error (already reported).
bool apply_option(int c, const char* arg, Options* o) {
  switch (c) {
    case 'u':
      if (o->url_count == kMaxUrls) {
        error_line("too many --url options (at most %d)", kMaxUrls);
        return false;
      }
      o->urls[o->url_count++] = arg;
      return true;
    case 't': return parse_ms("--ttl", arg, 1, edgelock::kMaxTtl.count(), &o->ttl_ms);
    case 'w': return parse_ms("--wait", arg, 0, kMaxWaitMs, &o->wait_ms);
    case kGrace: return parse_ms("--grace", arg, 0, 3600 * 1000, &o->grace_ms);
    case kTlsCa: o->tls_ca = arg; return true;
    case kTlsCert: o->tls_cert = arg; return true;
    case kTlsKey: o->tls_key = arg; return true;
    case kTlsServerName: o->tls_server_name = arg; return true;
    case kJson: o->json = true; return true;
    case 'q': o->quiet = true; return true;
    case kStats: o->stats = true; return true;
    case kPermits: return parse_num("--permits", arg, 1, edgelock::kMaxPermits, &o->permits);
    case kCount: o->count = true; return true;
    case kReleaseId: o->release_id = arg; return true;
    case kPeriod: return parse_ms("--period", arg, 1, edgelock::kMaxTtl.count(), &o->period_ms);
    case kQuota: return parse_num("--quota", arg, 1, INT32_MAX, &o->quota);
    case kWindow: return parse_ms("--window", arg, 1, edgelock::kMaxTtl.count(), &o->window_ms);
    case kServerWait: return parse_ms("--server-wait", arg, 0, edgelock::kMaxTtl.count(), &o->server_wait_ms);
    default: return false;
  }
}

struct Verb {
  const char* name;
  Subcommand command;
  int args;  // positional arguments after the verb
};
const Verb kVerbs[] = {
    {"run", Subcommand::kRun, 1},       {"acquire", Subcommand::kAcquire, 1},
    {"release", Subcommand::kRelease, 2}, {"extend", Subcommand::kExtend, 2},
    {"status", Subcommand::kStatus, 1}, {"semaphore", Subcommand::kSemaphore, 1},
    {"cooldown", Subcommand::kCooldown, 1},
};

// semaphore/cooldown option combinations.
int check_primitive(const Options& o) {
  const char* bad = nullptr;
  if (o.command == Subcommand::kSemaphore) {
    const int modes = (o.count ? 1 : 0) + (o.release_id ? 1 : 0) + (o.child_argv ? 1 : 0);
    if (o.permits == 0) bad = "semaphore needs --permits N";
    if (modes > 1) bad = "semaphore takes one of --count, --release ID or COMMAND";
    if (o.release_id && (o.release_id[0] == '\0' || std::strlen(o.release_id) > edgelock::kMaxTokenLen)) {
      error_line("--release wants a permit id of 1..%zu bytes", edgelock::kMaxTokenLen);
      return kExitUsage;
    }
  } else {
    const bool quota = o.quota != 0 || o.window_ms != 0;
    if (quota && (o.quota == 0 || o.window_ms == 0)) bad = "--quota and --window go together";
    if (quota && o.period_ms != 0) bad = "cooldown takes --period or --quota/--window, not both";
    if (!quota && o.period_ms == 0) bad = "cooldown needs --period MS (or --quota M --window MS)";
  }
  if (bad) {
    error_line("%s", bad);
    return kExitUsage;
  }
  return -1;
}

int parse_positionals(char** pos, int n, char** command, Options* o) {
  if (n == 0) {
    error_line("missing subcommand (run, acquire, release, extend, status, semaphore or cooldown;"
               " see --help)");
    return kExitUsage;
  }
  const Verb* verb = nullptr;
  for (const Verb& v : kVerbs) {
    if (std::strcmp(pos[0], v.name) == 0) verb = &v;
  }
  if (!verb) {
    error_line("unknown subcommand '%s' (see --help)", pos[0]);
    return kExitUsage;
  }
  o->command = verb->command;
  const int extra = n - 1 - verb->args;
  if (extra < 0) {
    error_line("%s needs %s", verb->name, verb->args == 2 ? "KEY and TOKEN" : "KEY");
    return kExitUsage;
  }
  o->key = pos[1];
  if (verb->args == 2) o->token = pos[2];
  if (o->key[0] == '\0') {
    error_line("KEY must not be empty");
    return kExitUsage;
  }
  if (verb->command == Subcommand::kRun) {
    // COMMAND follows "--"; without it, any words after KEY are taken.
    o->child_argv = command ? command : (extra > 0 ? pos + 2 : nullptr);
    if (!o->child_argv || !o->child_argv[0]) {
      error_line("run needs a COMMAND after '--'");
      return kExitUsage;
    }
  } else if (verb->command == Subcommand::kSemaphore || verb->command == Subcommand::kCooldown) {
    o->child_argv = command ? command : (extra > 0 ? pos + 2 : nullptr);  // optional
    if (o->child_argv && !o->child_argv[0]) o->child_argv = nullptr;
    return check_primitive(*o);
  } else if (extra > 0 || command) {
    error_line("unexpected argument '%s' after %s", extra > 0 ? pos[n - extra] : "--", verb->name);
    return kExitUsage;
  }
  return -1;
}

}  // namespace

int parse_args(int argc, char** argv, Options* o) {
  // Everything after the first "--" is COMMAND and is never parsed.
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      split = i;
      break;
    }
  }
  char** command = split < argc ? argv + split + 1 : nullptr;
  opterr = 0;
  optind = 1;
  for (;;) {
    const int c = getopt_long(split, argv, ":u:t:w:qh", kLongOptions, nullptr);
    if (c == -1) break;
    if (c == 'h') {
      std::fputs(kUsage, stdout);
      return kExitOk;
    }
    if (c == kVersion) {
      std::printf("edgelock %s (quorum: %s)\n", EDGELOCK_VERSION, quorum_feature()[0] ? "yes" : "no");
      return kExitOk;
    }
    if (c == '?' || c == ':') {
      char short_name[3] = {'-', static_cast<char>(optopt), '\0'};
      const char* what = optopt != 0 ? short_name : argv[optind - 1];
      if (c == ':') {
        error_line("option %s needs a value", what);
      } else {
        error_line("unknown option %s (see --help; put -- before COMMAND)", what);
      }
      return kExitUsage;
    }
    if (!apply_option(c, optarg, o)) return kExitUsage;
  }
  if (o->url_count == 0) {
    const char* env = std::getenv("EDGELOCK_URL");
    o->urls[o->url_count++] = env && env[0] ? env : "redis://127.0.0.1:6379";
  }
  const int rc = parse_positionals(argv + optind, split - optind, command, o);
  // --grace comes out of the lease: SIGTERM and SIGKILL must both fit in it.
  const bool leased = o->command == Subcommand::kRun || o->command == Subcommand::kSemaphore;
  if (rc == -1 && leased && o->child_argv && o->grace_ms > o->ttl_ms / 2) {
    error_line("--grace %lld does not fit --ttl %lld: COMMAND must be stopped within the lease;"
               " use at most TTL/2 (%lld)", static_cast<long long>(o->grace_ms),
               static_cast<long long>(o->ttl_ms), static_cast<long long>(o->ttl_ms / 2));
    return kExitUsage;
  }
  return rc;
}

}  // namespace cli
