#pragma once
// The simulated Redis's script engine: Lua 5.1 (the version Redis embeds)
// running a script's own text, with `redis.call` and `redis.pcall` bound to
// the model's commands (Keyspace::call) and Redis 7.0's conversions between
// replies and Lua values, its error texts (including the "script: <sha>, on
// @user_script:<line>." suffix) and its global-variable protection.
//
// One lua_State for the whole process: a script keeps no state between
// calls (KEYS and ARGV are set per call, globals cannot be created), so
// sharing it between simulated servers changes nothing they can see, and
// each body is compiled once, under its SHA-1. Deterministic: no clock but
// the model's (TIME), math.random and math.randomseed are removed, and only
// the base, table, string and math libraries are loaded (Redis's cjson,
// cmsgpack, struct and bit are not modelled: a script using them fails
// loudly with "nonexistent global variable").

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/keyspace.h"
#include "model/rval.h"

namespace edgelock {
namespace sim {

/// Compiles `body` under `sha` (its SHA-1) unless already compiled. On a
/// compile error returns false with *err set to Lua's message.
bool lua_compile(const std::string& sha, const std::string& body, std::string* err);

/// Runs the compiled script `sha` (lua_compile() first) as EVAL/EVALSHA
/// does: KEYS = argv[first_key .. first_key + numkeys), ARGV = the rest;
/// redis.call() runs on `ks` at server time `now_us`, frozen for the whole
/// script. Returns the script's reply.
RVal lua_run(const std::string& sha, const std::vector<std::string>& argv, size_t first_key,
             size_t numkeys, Keyspace* ks, int64_t now_us);

}  // namespace sim
}  // namespace edgelock
