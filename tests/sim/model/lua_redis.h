#pragma once
// The `redis` library of the simulated Redis's script engine and Redis
// 7.0's conversions of a script's value to a reply (private to
// model/lua_engine.cc).

#include <lua.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/keyspace.h"
#include "model/rval.h"

namespace edgelock {
namespace sim {

/// What redis.call() acts on while a script runs.
struct LuaCallCtx {
  Keyspace* ks = nullptr;
  int64_t now_ms = 0;  // the server's clock, frozen for the whole script
  int64_t now_us = 0;
};

/// Sets (nullptr: clears) what redis.call() acts on.
void lua_set_call_ctx(LuaCallCtx* ctx);
/// Sets the global `redis`: call, pcall, error_reply, status_reply,
/// sha1hex, log, set_repl, replicate_commands, LOG_*.
void lua_open_redis(lua_State* L);
/// The script's value at stack index `idx` as Redis 7.0 replies it (RESP2).
RVal lua_to_reply(lua_State* L, int idx);
/// A string field of the table at `idx`, or nullptr.
const char* lua_string_field(lua_State* L, int idx, const char* name, size_t* len);
/// The text with CR and LF turned into spaces (as Redis does in replies).
std::string lua_one_line(const char* s, size_t n);

}  // namespace sim
}  // namespace edgelock
