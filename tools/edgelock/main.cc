// edgelock: a Redis lock from the shell. See --help, edgelock(1) and
// docs/cli.md.
#include <cstdio>

#include "cli.h"
#include "lock_commands.h"
#include "primitives.h"
#include "quorum.h"
#include "report.h"
#include "target.h"

namespace cli {
namespace {

int dispatch(const Options& o) {
  const bool primitive = o.command == Subcommand::kSemaphore || o.command == Subcommand::kCooldown;
  if (primitive && o.url_count > 1) {
    return fail(
        "usage", kExitUsage,
        "semaphore and cooldown take one --url (no quorum variant: see docs/primitives.md)");
  }
  if (o.url_count > 1) return dispatch_quorum(o);
  Target target;
  const int rc = target.open(o, o.urls[0]);
  if (rc != kExitOk) return rc;
  return primitive ? dispatch_primitive(o, target) : lock_command(o, target);
}

}  // namespace
}  // namespace cli

int main(int argc, char** argv) {
  cli::Options options;
  int rc = cli::parse_args(argc, argv, &options);
  if (rc < 0) rc = cli::dispatch(options);
  cli::finish_output();
  std::fflush(stdout);
  return cli::exit_status(rc);
}
