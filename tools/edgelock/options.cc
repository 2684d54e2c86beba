// edgelock: command-line parsing.
#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cli.h"
#include "report.h"

namespace cli {

namespace {

// --wait: the longest wait a Nanos can hold, in ms.
constexpr int64_t kMaxWaitMs =
    std::chrono::duration_cast<edgelock::Millis>(edgelock::Nanos::max()).count();

enum LongOnly {
  kGrace = 256,
  kTlsCa,
  kTlsCert,
  kTlsKey,
  kTlsServerName,
  kJson,
  kVersion,
  kStats,
  kPermits,
  kCount,
  kReleaseId,
  kPeriod,
  kQuota,
  kWindow,
  kServerWait,
  kPeek,
  kReset,
  kWaitReplicas,
  kFair,
  kWaiterTimeout,
  kReplicaTimeout,
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
    {"peek", no_argument, nullptr, kPeek},
    {"reset", no_argument, nullptr, kReset},
    {"server-wait", required_argument, nullptr, kServerWait},
    {"wait-replicas", required_argument, nullptr, kWaitReplicas},
    {"fair", no_argument, nullptr, kFair},
    {"waiter-timeout", required_argument, nullptr, kWaiterTimeout},
    {"conflict-exit-code", required_argument, nullptr, 'E'},
    {"replica-timeout", required_argument, nullptr, kReplicaTimeout},
    {nullptr, 0, nullptr, 0},
};

int usage_error(const char* text) { return fail("usage", kExitUsage, "%s", text); }

// Parses a whole decimal string in [lo, hi]; `what` names the unit.
bool parse_in(const char* name, const char* what, const char* text, int64_t lo, int64_t hi,
              int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    fail("usage", kExitUsage, "%s wants %s in %lld..%lld, got '%s'", name, what,
         static_cast<long long>(lo), static_cast<long long>(hi), text);
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

// --wait MS, or forever ("forever" or -1).
bool parse_wait(const char* text, Options* o) {
  o->wait_given = true;
  if (std::strcmp(text, "forever") == 0 || std::strcmp(text, "-1") == 0) {
    o->wait_ms = kForeverMs;
    return true;
  }
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > kMaxWaitMs) {
    fail("usage", kExitUsage,
         "--wait wants a number of milliseconds in 0..%lld, or 'forever' (or -1), got '%s'",
         static_cast<long long>(kMaxWaitMs), text);
    return false;
  }
  o->wait_ms = v;
  return true;
}

// Applies one option; false on a usage error (already reported).
bool apply_option(int c, const char* arg, Options* o) {
  switch (c) {
    case 'u':
      if (o->url_count == kMaxUrls) {
        fail("usage", kExitUsage, "too many --url options (at most %d)", kMaxUrls);
        return false;
      }
      o->urls[o->url_count++] = arg;
      return true;
    case 't': return parse_ms("--ttl", arg, 1, edgelock::kMaxTtl.count(), &o->ttl_ms);
    case 'w': return parse_wait(arg, o);
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
    case kPeek: o->peek = true; return true;
    case kReset: o->reset = true; return true;
    case kServerWait:
      return parse_ms("--server-wait", arg, 0, edgelock::kMaxTtl.count(), &o->server_wait_ms);
    case kWaitReplicas: return parse_num("--wait-replicas", arg, 0, 16, &o->wait_replicas);
    case kReplicaTimeout:
      return parse_ms("--replica-timeout", arg, 1, 60000, &o->replica_timeout_ms);
    case 'E': return parse_num("--conflict-exit-code", arg, 0, 255, &o->conflict_exit);
    case kFair: o->fair = true; return true;
    case kWaiterTimeout:
      return parse_ms("--waiter-timeout", arg, 500, edgelock::kMaxTtl.count(),
                      &o->waiter_timeout_ms);
    default: return false;
  }
}

struct Verb {
  const char* name;
  Subcommand command;
  int args;  // positional arguments after the verb
};
const Verb kVerbs[] = {
    {"run", Subcommand::kRun, 1},           {"acquire", Subcommand::kAcquire, 1},
    {"release", Subcommand::kRelease, 2},   {"extend", Subcommand::kExtend, 2},
    {"status", Subcommand::kStatus, 1},     {"semaphore", Subcommand::kSemaphore, 1},
    {"cooldown", Subcommand::kCooldown, 1},
};

// Options that belong to another subcommand than the one given.
const char* misplaced_option(const Options& o) {
  const bool sem = o.command == Subcommand::kSemaphore;
  const bool cool = o.command == Subcommand::kCooldown;
  if (!sem && (o.permits != 0 || o.count || o.release_id))
    return "--permits, --count and --release are for semaphore";
  if (!cool && (o.period_ms != 0 || o.quota != 0 || o.window_ms != 0 || o.peek || o.reset)) {
    return "--period, --quota, --window, --peek and --reset are for cooldown";
  }
  if (o.grace_ms >= 0 && o.command != Subcommand::kRun && !sem) {
    return "--grace is for run and semaphore -- COMMAND (the time COMMAND gets to stop)";
  }
  if ((sem || cool) && (o.fair || o.waiter_timeout_ms >= 0)) {
    return "--fair and --waiter-timeout are for the lock subcommands";
  }
  if (o.waiter_timeout_ms >= 0 && !o.fair) return "--waiter-timeout goes with --fair";
  if (o.replica_timeout_ms >= 0 && o.wait_replicas == 0) {
    return "--replica-timeout goes with --wait-replicas N";
  }
  if (o.fair && o.url_count > 1) return "--fair takes one --url (no fair quorum lock)";
  return nullptr;
}

// semaphore/cooldown option combinations.
const char* check_primitive(const Options& o) {
  if (o.command == Subcommand::kSemaphore) {
    const int modes = (o.count ? 1 : 0) + (o.release_id ? 1 : 0) + (o.child_argv ? 1 : 0);
    if (o.permits == 0) return "semaphore needs --permits N";
    if (modes > 1) return "semaphore takes one of --count, --release ID or COMMAND";
    if (o.release_id &&
        (o.release_id[0] == '\0' || std::strlen(o.release_id) > edgelock::kMaxTokenLen)) {
      static_assert(edgelock::kMaxTokenLen == 64, "the message below names the limit");
      return "--release wants a permit id of 1..64 bytes";
    }
    return nullptr;
  }
  const bool quota = o.quota != 0 || o.window_ms != 0;
  if (quota && (o.quota == 0 || o.window_ms == 0)) return "--quota and --window go together";
  if (quota && o.period_ms != 0) return "cooldown takes --period or --quota/--window, not both";
  if (!quota && o.period_ms == 0) return "cooldown needs --period MS (or --quota M --window MS)";
  if (o.peek && o.reset) return "cooldown takes --peek or --reset, not both";
  if ((o.peek || o.reset) && o.child_argv) return "--peek and --reset run no COMMAND";
  return nullptr;
}

int parse_positionals(char** pos, int n, char** command, Options* o) {
  if (n == 0) {
    return usage_error(
        "missing subcommand (run, acquire, release, extend, status, semaphore or cooldown;"
        " see --help)");
  }
  const Verb* verb = nullptr;
  for (const Verb& v : kVerbs) {
    if (std::strcmp(pos[0], v.name) == 0) verb = &v;
  }
  if (!verb) return fail("usage", kExitUsage, "unknown subcommand '%s' (see --help)", pos[0]);
  o->command = verb->command;
  const int extra = n - 1 - verb->args;
  if (extra < 0)
    return fail("usage", kExitUsage, "%s needs %s", verb->name,
                verb->args == 2 ? "KEY and TOKEN" : "KEY");
  o->key = pos[1];
  if (verb->args == 2) o->token = pos[2];
  if (o->key[0] == '\0') return usage_error("KEY must not be empty");
  if (std::strlen(o->key) > edgelock::kMaxKeyLen) {
    return fail("usage", kExitUsage, "KEY is longer than %zu bytes", edgelock::kMaxKeyLen);
  }
  if (const char* bad = misplaced_option(*o)) return usage_error(bad);
  if (verb->command == Subcommand::kRun) {
    // COMMAND follows "--"; without it, any words after KEY are taken.
    o->child_argv = command ? command : (extra > 0 ? pos + 2 : nullptr);
    if (!o->child_argv || !o->child_argv[0]) return usage_error("run needs a COMMAND after '--'");
  } else if (verb->command == Subcommand::kSemaphore || verb->command == Subcommand::kCooldown) {
    o->child_argv = command ? command : (extra > 0 ? pos + 2 : nullptr);  // optional
    if (o->child_argv && !o->child_argv[0]) o->child_argv = nullptr;
    if (const char* bad = check_primitive(*o)) return usage_error(bad);
  } else if (extra > 0 || command) {
    return fail("usage", kExitUsage, "unexpected argument '%s' after %s",
                extra > 0 ? pos[n - extra] : "--", verb->name);
  }
  if (o->conflict_exit >= 0 && !o->child_argv) {
    return usage_error("-E/--conflict-exit-code is for a COMMAND (run, semaphore or cooldown --)");
  }
  return -1;
}

// --json and -q apply to errors found while parsing, too.
void early_modes(int split, char** argv, Options* o) {
  for (int i = 1; i < split; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) o->json = true;
    if (std::strcmp(argv[i], "-q") == 0 || std::strcmp(argv[i], "--quiet") == 0) o->quiet = true;
  }
  set_output(*o);
}

// Runs getopt over argv[0..split). Returns -1 to go on, else an exit code.
int parse_flags(int split, char** argv, Options* o) {
  opterr = 0;
  optind = 1;
  for (;;) {
    const int c = getopt_long(split, argv, ":u:t:w:E:qh", kLongOptions, nullptr);
    if (c == -1) return -1;
    if (c == 'h') {
      print_usage();
      return kExitOk;
    }
    if (c == kVersion) {
      print_version();
      return kExitOk;
    }
    if (c == '?' || c == ':') {
      char short_name[3] = {'-', static_cast<char>(optopt), '\0'};
      const char* what = optopt != 0 ? short_name : argv[optind - 1];
      if (c == ':') return fail("usage", kExitUsage, "option %s needs a value", what);
      return fail("usage", kExitUsage, "unknown option %s (see --help; put -- before COMMAND)",
                  what);
    }
    if (!apply_option(c, optarg, o)) return kExitUsage;
  }
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
  early_modes(split, argv, o);
  int rc = parse_flags(split, argv, o);
  if (rc != -1) return rc;
  if (o->url_count == 0) {
    const char* env = std::getenv("EDGELOCK_URL");
    o->urls[o->url_count++] = env && env[0] ? env : "redis://127.0.0.1:6379";
  }
  rc = parse_positionals(argv + optind, split - optind, command, o);
  set_output(*o);
  // --grace comes out of the lease: SIGTERM and SIGKILL must both fit in it.
  const bool leased = o->command == Subcommand::kRun || o->command == Subcommand::kSemaphore;
  if (rc == -1 && leased && o->child_argv && o->grace_ms > o->ttl_ms / 2) {
    return fail("usage", kExitUsage,
                "--grace %lld does not fit --ttl %lld: COMMAND must be stopped within the lease;"
                " use at most TTL/2 (%lld)",
                static_cast<long long>(o->grace_ms), static_cast<long long>(o->ttl_ms),
                static_cast<long long>(o->ttl_ms / 2));
  }
  return rc;
}

}  // namespace cli
