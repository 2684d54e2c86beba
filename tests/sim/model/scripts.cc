#include "model/scripts.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/lua_engine.h"
#include "primitives/script_registry.h"

namespace edgelock {
namespace sim {

using detail::kScriptRegistry;
using detail::ScriptEntry;

const char* library_script_name(const std::string& sha) {
  if (sha.size() != 40) return nullptr;
  for (const ScriptEntry& e : kScriptRegistry) {
    if (std::memcmp(sha.data(), e.script->sha1, 40) == 0) return e.name;
  }
  return nullptr;
}

void check_library_scripts() {
  bool bad = false;
  for (const ScriptEntry& e : kScriptRegistry) {
    std::string err;
    if (!lua_compile(std::string(e.script->sha1, 40), e.script->body, &err)) {
      std::fprintf(stderr, "SIMULATOR MODEL FAILURE: %s does not compile with Lua 5.1: %s\n",
                   e.name, err.c_str());
      bad = true;
    }
  }
  if (bad) std::abort();
}

}  // namespace sim
}  // namespace edgelock
