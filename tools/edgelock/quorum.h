#pragma once
// edgelock with several --url: a quorum lock (quorum.cc).

#include "cli.h"

namespace cli {

// acquire/run through a QuorumLock; release/extend/status by token on
// every server, decided by a majority.
int dispatch_quorum(const Options& o);

}  // namespace cli
