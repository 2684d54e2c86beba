#pragma once
// Which of the library's scripts a request runs: the names of the entries
// of the script registry (src/primitives/script_registry.h), found by SHA-1. The
// SHA-1s come from the same constants the library sends (make_script() of
// their text), so a script edited in src/ is recognised, and simulated, as
// written; the simulated Redis runs every script's text with Lua
// (model/lua_engine.h).

#include <string>

namespace edgelock {
namespace sim {

/// The name of the library script with this SHA-1 (lower-case hex), as
/// its constant is spelt ("kAcquireScript", "kSemAcquireScript", ...), or
/// nullptr for a script that is not one of the library's.
const char* library_script_name(const std::string& sha);
/// Compiles every library script; prints the ones Lua 5.1 refuses (a
/// script the real server would refuse too) and aborts if any.
void check_library_scripts();

}  // namespace sim
}  // namespace edgelock
