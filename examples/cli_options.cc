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

const char kUsage[] =
    "Usage: edgelock [OPTIONS] run KEY -- COMMAND [ARG...]\n"
    "       edgelock [OPTIONS] acquire KEY\n"
    "       edgelock [OPTIONS] release KEY TOKEN\n"
    "       edgelock [OPTIONS] extend KEY TOKEN\n"
    "       edgelock [OPTIONS] status KEY\n"
    "\n"
    "A Redis lock from the shell: run a command only while holding KEY.\n"
    "\n"
    "Subcommands:\n"
    "  run      acquire KEY, keep it renewed (every TTL/3) while COMMAND runs,\n"
    "           release it when COMMAND exits and exit with COMMAND's status.\n"
    "           COMMAND gets EDGELOCK_KEY, EDGELOCK_TOKEN and EDGELOCK_FENCE.\n"
    "           If the lease is lost, COMMAND gets SIGTERM, then SIGKILL after\n"
    "           --grace, and edgelock exits 4.\n"
    "  acquire  acquire KEY and print \"TOKEN FENCE\"; the lease expires after\n"
    "           the TTL unless released or extended.\n"
    "  release  release KEY if TOKEN still owns it.\n"
    "  extend   reset KEY's TTL to --ttl if TOKEN still owns it.\n"
    "  status   print \"held TTL_MS\" or \"free\" for KEY.\n"
    "\n"
    "Options:\n"
    "  -u, --url URL          Redis server: redis://[[user]:password@]host[:port][/db],\n"
    "                         rediss://... (TLS) or unix:///path. Repeat for a quorum\n"
    "                         lock over independent servers. Default: $EDGELOCK_URL,\n"
    "                         else redis://127.0.0.1:6379.\n"
    "  -t, --ttl MS           lease length in milliseconds (default 10000).\n"
    "  -w, --wait MS          how long to wait for the lock; 0 = fail at once if it\n"
    "                         is held (like flock -n). Default: wait forever.\n"
    "      --grace MS         run: time between SIGTERM and SIGKILL after a lost\n"
    "                         lease (default 2000).\n"
    "      --tls-ca FILE      CA certificate(s) to verify the server (PEM).\n"
    "      --tls-cert FILE    client certificate for mutual TLS (PEM).\n"
    "      --tls-key FILE     client key for mutual TLS (PEM).\n"
    "      --tls-server-name NAME  name to verify instead of the URL's host.\n"
    "      --json             one JSON object per result on stdout (key, token,\n"
    "                         fence, ttl_ms, validity_ms, held).\n"
    "  -q, --quiet            print no results and no notices (errors still go\n"
    "                         to stderr).\n"
    "  -h, --help             show this help.\n"
    "      --version          show the version.\n"
    "\n"
    "Environment: EDGELOCK_URL (default URL), EDGELOCK_PASSWORD (used when the URL\n"
    "has none; passwords are never printed).\n"
    "\n"
    "Exit status: 0 success; 1 not acquired within --wait (busy); 2 usage or\n"
    "invalid argument; 3 connection, authentication, TLS or server error; 4 lease\n"
    "lost during run; 5 not the owner (stale token). For run, otherwise\n"
    "COMMAND's own status (128+N if it died of signal N, 127 if not found).\n";

enum LongOnly { kGrace = 256, kTlsCa, kTlsCert, kTlsKey, kTlsServerName, kJson, kVersion };

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
    {nullptr, 0, nullptr, 0},
};

// Parses a whole decimal string in [lo, hi].
bool parse_ms(const char* name, const char* text, int64_t lo, int64_t hi, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    error_line("%s wants a number of milliseconds in %lld..%lld, got '%s'", name,
               static_cast<long long>(lo), static_cast<long long>(hi), text);
    return false;
  }
  *out = v;
  return true;
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
    case 't': return parse_ms("--ttl", arg, 1, edgelock::kMaxTtlMs, &o->ttl_ms);
    case 'w': return parse_ms("--wait", arg, 0, INT64_MAX / edgelock::kNanosPerMilli, &o->wait_ms);
    case kGrace: return parse_ms("--grace", arg, 0, 3600 * 1000, &o->grace_ms);
    case kTlsCa: o->tls_ca = arg; return true;
    case kTlsCert: o->tls_cert = arg; return true;
    case kTlsKey: o->tls_key = arg; return true;
    case kTlsServerName: o->tls_server_name = arg; return true;
    case kJson: o->json = true; return true;
    case 'q': o->quiet = true; return true;
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
    {"status", Subcommand::kStatus, 1},
};

int parse_positionals(char** pos, int n, char** command, Options* o) {
  if (n == 0) {
    error_line("missing subcommand (run, acquire, release, extend or status; see --help)");
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
  return parse_positionals(argv + optind, split - optind, command, o);
}

}  // namespace cli
