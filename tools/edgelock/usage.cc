// edgelock: --help and --version.
#include <cstdio>

#include "cli.h"
#include "edgelock/config.h"
#include "edgelock/detail/build_info.h"
#include "handles.h"

#ifndef EDGELOCK_TOOL_VERSION
#define EDGELOCK_TOOL_VERSION "unknown"
#endif

namespace cli {

namespace {

const char kUsage[] =
    "Usage: edgelock [OPTIONS] run KEY -- COMMAND [ARG...]\n"
    "       edgelock [OPTIONS] acquire KEY\n"
    "       edgelock [OPTIONS] release KEY TOKEN\n"
    "       edgelock [OPTIONS] extend KEY TOKEN\n"
    "       edgelock [OPTIONS] status KEY\n"
    "       edgelock [OPTIONS] semaphore KEY --permits N [-- COMMAND [ARG...]]\n"
    "       edgelock [OPTIONS] semaphore KEY --permits N --count | --release ID\n"
    "       edgelock [OPTIONS] cooldown KEY --period MS [--peek | --reset] [-- COMMAND...]\n"
    "       edgelock [OPTIONS] cooldown KEY --quota M --window MS [--peek | --reset] [-- "
    "COMMAND...]\n"
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
    "           --peek answers without taking; --reset ends the period now.\n"
    "\n"
    "Options:\n"
    "  -u, --url URL          redis://[[user]:password@]host[:port][/db], rediss://...\n"
    "                         (TLS), unix:///path[?db=N],\n"
    "                         redis-sentinel://[[user]:password@]host:port[,...]/NAME\n"
    "                         or redis-cluster://[[user]:password@]host:port[,...].\n"
    "                         Repeat (redis://, rediss://, unix://) for a quorum lock\n"
    "                         over independent servers. Default: $EDGELOCK_URL,\n"
    "                         else redis://127.0.0.1:6379.\n"
    "  -t, --ttl MS           lease length in milliseconds (default 10000).\n"
    "  -w, --wait MS          how long to wait for the lock; 0 = fail at once if it\n"
    "                         is held (like flock -n); 'forever' or -1 = no limit\n"
    "                         (the default; cooldown waits only if -w is given).\n"
    "  -E, --conflict-exit-code N  with COMMAND: exit N instead of 1 when the lock\n"
    "                         is held (no permit, not allowed), like flock -E.\n"
    "      --server-wait MS   give up (exit 3) once the server has given no usable\n"
    "                         answer for MS (timeouts, failed connects, grants too\n"
    "                         late), even within --wait (default 10000).\n"
    "      --grace MS         run, semaphore -- COMMAND: time between SIGTERM and\n"
    "                         SIGKILL, taken out of the lease (at most TTL/2;\n"
    "                         default min(2000, TTL/4)).\n"
    "      --fair             lock subcommands: a fair lock, first come first served\n"
    "                         (waiters queue on the server; one --url). Use it\n"
    "                         for every command on the key.\n"
    "      --waiter-timeout MS  --fair: a waiter that stops renewing its place\n"
    "                         drops out after MS (>= 500; default 2000).\n"
    "      --wait-replicas N  Sentinel and Cluster: a grant or renewal counts only\n"
    "                         once N replicas have it (WAIT); default 0.\n"
    "      --replica-timeout MS  how long WAIT may block (default 200; at most\n"
    "                         half the command budget).\n"
    "      --tls-ca FILE      CA certificate(s) to verify the server (PEM).\n"
    "      --tls-cert FILE    client certificate for mutual TLS (PEM).\n"
    "      --tls-key FILE     client key for mutual TLS (PEM).\n"
    "      --tls-server-name NAME  name to verify instead of the URL's host.\n"
    "      --json             one JSON object per result and per error on stdout\n"
    "                         (fields: docs/cli.md, edgelock(1)).\n"
    "      --stats            at exit, print the counters of the connection, the\n"
    "                         back end and the handle to stderr.\n"
    "      --permits N        semaphore: N permits (required).\n"
    "      --count            semaphore: print the permits in use.\n"
    "      --release ID       semaphore: return the permit ID.\n"
    "      --period MS        cooldown: the period.\n"
    "      --quota M, --window MS  cooldown: at most M times per window instead.\n"
    "      --peek             cooldown: say whether it would be allowed, take nothing.\n"
    "      --reset            cooldown: end the period (or window) now.\n"
    "  -q, --quiet            no notices on stderr; results still go to stdout and\n"
    "                         errors to stderr.\n"
    "  -h, --help             show this help.\n"
    "      --version          show the versions, TLS and the capacities.\n"
    "\n"
    "Environment: EDGELOCK_URL (the URL when no -u is given), EDGELOCK_PASSWORD,\n"
    "else REDISCLI_AUTH (the password when the URL has none),\n"
    "EDGELOCK_SENTINEL_PASSWORD (AUTH to the sentinels). Passwords are never\n"
    "printed.\n"
    "\n"
    "Exit status: 0 success; 1 not acquired within --wait (busy), or cooldown\n"
    "not allowed; 2 usage or invalid argument; 3 connection, authentication, TLS\n"
    "or server error, no answer within --server-wait, a reply too large, a grant\n"
    "too late to use; 4 lease (or permit) lost during run/semaphore; 5 not the\n"
    "owner (stale token or permit id). With COMMAND, otherwise COMMAND's own\n"
    "status (128+N if it died of signal N, 127 if not found, 126 if not run;\n"
    "-E N replaces 1 for busy).\n"
    "\n"
    "See edgelock(1) and docs/cli.md.\n";

}  // namespace

void print_usage() { std::fputs(kUsage, stdout); }

void print_version() {
  const edgelock::BuildInfo b = edgelock::build_info();
  std::printf("edgelock %s\n", EDGELOCK_TOOL_VERSION);
  if (b.tls) {
    std::printf("library %s, hiredis %s, mbedTLS %s (linked %s), TLS on (up to %s)\n", b.version,
                b.hiredis, b.mbedtls, b.mbedtls_linked, b.tls_max);
  } else {
    std::printf("library %s, hiredis %s, mbedTLS not built in, TLS off\n", b.version, b.hiredis);
  }
  std::printf(
      "capacities: max_key_len=%zu tx_buffer_size=%zu rx_buffer_size=%zu max_cluster_nodes=%zu"
      " max_quorum_servers=%zu\n",
      edgelock::config::kMaxKeyLen, edgelock::config::kTxBufferSize,
      edgelock::config::kRxBufferSize, edgelock::config::kMaxClusterNodes,
      edgelock::config::kMaxQuorumServers);
  std::printf(
      "URLs: redis:// rediss:// unix:// (several: quorum lock) redis-sentinel:// redis-cluster://"
      " (every subcommand)\n");
}

}  // namespace cli
