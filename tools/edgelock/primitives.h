#pragma once
// edgelock semaphore and cooldown (primitives.cc).

#include "cli.h"
#include "target.h"

namespace cli {

// semaphore, cooldown (--period) and quota (--quota/--window) on the
// target's back end.
int dispatch_primitive(const Options& o, Target& t);

}  // namespace cli
