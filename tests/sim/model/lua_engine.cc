#include "model/lua_engine.h"

#include <cstring>

#include "model/fail.h"
#include "model/lua_redis.h"

namespace edgelock {
namespace sim {

namespace {

// Count-hook ticks of the running script (kHookEvery instructions each).
uint64_t g_ticks = 0;
constexpr int kHookEvery = 1000000;
constexpr uint64_t kMaxTicks = 1000;  // 10^9 instructions: a real server says BUSY long before
int g_handler_ref = LUA_NOREF;
int g_chunks_ref = LUA_NOREF;

void hook(lua_State* L, lua_Debug* ar) {
  (void)L;
  (void)ar;
  if (++g_ticks > kMaxTicks) {
    model_fail("a script ran for more than %llu Lua instructions (a real server answers BUSY)",
               static_cast<unsigned long long>(kMaxTicks * kHookEvery));
  }
}

// Redis 7.0's error handler: an error becomes {err, source, line}, with
// the line of the script, not of redis.call(). The debug library is gone
// for scripts.
const char kPrelude[] =
    "local dbg = debug\n"
    "debug = nil\n"
    "return function(err)\n"
    "  local i = dbg.getinfo(2, 'nSl')\n"
    "  if i and i.what == 'C' then i = dbg.getinfo(3, 'nSl') end\n"
    "  if type(err) ~= 'table' then err = {err = 'ERR ' .. tostring(err)} end\n"
    "  if i then\n"
    "    err['source'] = i.source\n"
    "    err['line'] = i.currentline\n"
    "  end\n"
    "  return err\n"
    "end\n";

// Redis 7.0's globals are read-only and reading an unknown one fails. Both
// raise from C, so the message and the error's line are the script's.
int global_read(lua_State* L) {
  const char* name = lua_tostring(L, 2);
  return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                    name ? name : "?");
}

int global_write(lua_State* L) { return luaL_error(L, "Attempt to modify a readonly table"); }

void protect_globals(lua_State* L) {
  lua_newtable(L);
  lua_pushcfunction(L, global_read);
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, global_write);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, LUA_GLOBALSINDEX);
}

void open_lib(lua_State* L, lua_CFunction f, const char* name) {
  lua_pushcfunction(L, f);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
}

lua_State* make_state() {
  lua_State* L = luaL_newstate();
  if (!L) model_fail("lua: cannot create a state");
  open_lib(L, luaopen_base, "");
  open_lib(L, luaopen_table, LUA_TABLIBNAME);
  open_lib(L, luaopen_string, LUA_STRLIBNAME);
  open_lib(L, luaopen_math, LUA_MATHLIBNAME);
  open_lib(L, luaopen_debug, LUA_DBLIBNAME);
  // Nothing that reads files or draws randomness: a run is its seed only.
  const char* const gone[] = {"loadfile", "dofile"};
  for (const char* g : gone) {
    lua_pushnil(L);
    lua_setglobal(L, g);
  }
  lua_getglobal(L, "math");
  lua_pushnil(L);
  lua_setfield(L, -2, "random");
  lua_pushnil(L);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
  lua_open_redis(L);
  if (luaL_loadbuffer(L, kPrelude, sizeof kPrelude - 1, "=prelude") || lua_pcall(L, 0, 1, 0))
    model_fail("lua: prelude: %s", lua_tostring(L, -1));
  g_handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  protect_globals(L);
  lua_newtable(L);
  g_chunks_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_sethook(L, hook, LUA_MASKCOUNT, kHookEvery);
  return L;
}

lua_State* state() {
  static lua_State* const L = make_state();
  return L;
}

// Pushes the compiled script `sha` (nil if not compiled).
void push_chunk(lua_State* L, const std::string& sha) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_chunks_ref);
  lua_getfield(L, -1, sha.c_str());
  lua_remove(L, -2);
}

void set_array(lua_State* L, const char* name, const std::vector<std::string>& argv, size_t from,
               size_t to) {
  lua_pushstring(L, name);
  lua_createtable(L, static_cast<int>(to - from), 0);
  for (size_t i = from; i < to; ++i) {
    lua_pushlstring(L, argv[i].data(), argv[i].size());
    lua_rawseti(L, -2, static_cast<int>(i - from + 1));
  }
  lua_rawset(L, LUA_GLOBALSINDEX);  // past the globals protection, as Redis sets them
}

// The reply for a script that raised (the handler's table at the top).
RVal raised(lua_State* L, const std::string& sha) {
  if (!lua_istable(L, -1)) {
    const char* m = lua_tostring(L, -1);
    return RVal::error("ERR Error running script " + sha + ", " + (m ? m : "execution failure"));
  }
  const int t = lua_gettop(L);
  size_t n = 0;
  const char* e = lua_string_field(L, t, "err", &n);
  std::string out = e ? std::string(e, n) : "ERR unknown error";
  size_t sn = 0;
  const char* source = lua_string_field(L, t, "source", &sn);
  lua_getfield(L, t, "line");
  const bool has_line = lua_isnumber(L, -1) != 0;
  const long line = static_cast<long>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  if (source && has_line) {
    out += " script: " + sha + ", on " + std::string(source, sn) + ":" + std::to_string(line) + ".";
  }
  return RVal::error(lua_one_line(out.data(), out.size()));
}

}  // namespace

bool lua_compile(const std::string& sha, const std::string& body, std::string* err) {
  lua_State* L = state();
  push_chunk(L, sha);
  const bool have = lua_isfunction(L, -1);
  lua_pop(L, 1);
  if (have) return true;
  if (luaL_loadbuffer(L, body.data(), body.size(), "@user_script")) {
    *err = lua_one_line(lua_tostring(L, -1), std::strlen(lua_tostring(L, -1)));
    lua_settop(L, 0);
    return false;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_chunks_ref);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, sha.c_str());
  lua_settop(L, 0);
  return true;
}

RVal lua_run(const std::string& sha, const std::vector<std::string>& argv, size_t first_key,
             size_t numkeys, Keyspace* ks, int64_t now_us) {
  lua_State* L = state();
  LuaCallCtx ctx;
  ctx.ks = ks;
  ctx.now_ms = now_us / 1000;
  ctx.now_us = now_us;
  lua_set_call_ctx(&ctx);
  g_ticks = 0;
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_handler_ref);
  push_chunk(L, sha);
  if (!lua_isfunction(L, -1)) model_fail("lua: script %s run before it was compiled", sha.c_str());
  set_array(L, "KEYS", argv, first_key, first_key + numkeys);
  set_array(L, "ARGV", argv, first_key + numkeys, argv.size());
  const int rc = lua_pcall(L, 0, 1, 1);
  RVal out = rc == 0 ? lua_to_reply(L, lua_gettop(L)) : raised(L, sha);
  lua_settop(L, 0);
  lua_set_call_ctx(nullptr);
  return out;
}

}  // namespace sim
}  // namespace edgelock
