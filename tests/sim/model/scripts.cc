#include "model/scripts.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fair_scripts.h"
#include "lock_scripts.h"
#include "model/lua_engine.h"
#include "rate_scripts.h"
#include "reentrant_scripts.h"
#include "semaphore_scripts.h"

namespace edgelock {
namespace sim {

namespace {

struct LibraryScript {
  const char* name;
  const Script* script;
};

#define SIM_SCRIPT(s) \
  { #s, &detail::s }
const LibraryScript kLibrary[] = {
    SIM_SCRIPT(kAcquireScript),
    SIM_SCRIPT(kReleaseScript),
    SIM_SCRIPT(kExtendScript),
    SIM_SCRIPT(kOwnedScript),
    SIM_SCRIPT(kFenceRaiseScript),
    SIM_SCRIPT(kQuorumAcquireScript),
    SIM_SCRIPT(kSemAcquireScript),
    SIM_SCRIPT(kSemReleaseScript),
    SIM_SCRIPT(kSemExtendScript),
    SIM_SCRIPT(kSemCountScript),
    SIM_SCRIPT(kReentrantAcquireScript),
    SIM_SCRIPT(kReentrantReleaseScript),
    SIM_SCRIPT(kReentrantExtendScript),
    SIM_SCRIPT(kCooldownScript),
    SIM_SCRIPT(kQuotaScript),
    SIM_SCRIPT(kRatePeekScript),
    SIM_SCRIPT(kFairAcquireScript),
    SIM_SCRIPT(kFairReleaseScript),
    SIM_SCRIPT(kFairLeaveScript),
    SIM_SCRIPT(kFairWakeScript),
};
#undef SIM_SCRIPT

}  // namespace

const char* library_script_name(const std::string& sha) {
  if (sha.size() != 40) return nullptr;
  for (const LibraryScript& l : kLibrary) {
    if (std::memcmp(sha.data(), l.script->sha1, 40) == 0) return l.name;
  }
  return nullptr;
}

void check_library_scripts() {
  bool bad = false;
  for (const LibraryScript& l : kLibrary) {
    std::string err;
    if (!lua_compile(std::string(l.script->sha1, 40), l.script->body, &err)) {
      std::fprintf(stderr, "SIMULATOR MODEL FAILURE: %s does not compile with Lua 5.1: %s\n",
                   l.name, err.c_str());
      bad = true;
    }
  }
  if (bad) std::abort();
}

}  // namespace sim
}  // namespace edgelock
