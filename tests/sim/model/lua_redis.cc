#include "model/lua_redis.h"

#include <cstring>

#include "model/fail.h"
#include "model/server_core.h"

namespace edgelock {
namespace sim {

namespace {

LuaCallCtx* g_ctx = nullptr;  // what redis.call() acts on (one script at a time)

// Redis answers a Lua number with (long long) of it; out of range that is
// INT64_MIN on x86-64 (the servers the differential test runs against), so
// the model says the same on every host instead of relying on the cast.
int64_t to_reply_int(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(d);
}

// Redis's error-table text (luaPushErrorBuff): "-CODE msg" keeps CODE, a
// text without a leading '-' gets "ERR"; the message loses trailing CR/LF.
std::string error_text(const char* s, size_t n, bool dashed) {
  std::string code = "ERR", msg(s, n);
  if (dashed) {
    const size_t sp = msg.find(' ');
    if (sp != std::string::npos) {
      code = msg.substr(0, sp);
      msg.erase(0, sp + 1);
    }
  }
  while (!msg.empty() && (msg.back() == '\r' || msg.back() == '\n')) msg.pop_back();
  return code + " " + msg;
}

// Pushes {field = text}.
void push_field_table(lua_State* L, const char* field, const std::string& text) {
  lua_createtable(L, 0, 1);
  lua_pushlstring(L, text.data(), text.size());
  lua_setfield(L, -2, field);
}

// A reply as redis.call() hands it to the script (redisProtocolToLuaType).
void push_reply(lua_State* L, const RVal& r) {
  switch (r.type) {
    case RType::kInt: lua_pushnumber(L, static_cast<lua_Number>(r.i)); break;
    case RType::kBulk: lua_pushlstring(L, r.s.data(), r.s.size()); break;
    case RType::kNil:
    case RType::kNilArray: lua_pushboolean(L, 0); break;
    case RType::kStatus: push_field_table(L, "ok", r.s); break;
    case RType::kError: push_field_table(L, "err", error_text(r.s.data(), r.s.size(), true)); break;
    case RType::kArray:
      if (!lua_checkstack(L, 3)) model_fail("lua: reply nested too deep");
      lua_createtable(L, static_cast<int>(r.a.size()), 0);
      for (size_t i = 0; i < r.a.size(); ++i) {
        push_reply(L, r.a[i]);
        lua_rawseti(L, -2, static_cast<int>(i + 1));
      }
      break;
  }
}

// The body of redis.call()/redis.pcall(): runs the command and pushes its
// reply; returns true if that is an error table. No Lua error is raised in
// here, so every C++ object is gone before the caller raises one.
bool call_command(lua_State* L) {
  static std::vector<std::string> argv;  // reused: one call at a time
  const int argc = lua_gettop(L);
  if (argc == 0) {
    push_field_table(L, "err", "ERR Please specify at least one argument for this redis lib call");
    return true;
  }
  argv.resize(static_cast<size_t>(argc));
  for (int j = 1; j <= argc; ++j) {
    std::string& a = argv[static_cast<size_t>(j - 1)];
    if (lua_type(L, j) == LUA_TNUMBER) {
      // Not lua_tostring(): Redis passes numbers on with full precision.
      a = lua_num_arg(lua_tonumber(L, j));
    } else if (lua_type(L, j) == LUA_TSTRING) {
      size_t n = 0;
      const char* s = lua_tolstring(L, j, &n);
      a.assign(s, n);
    } else {
      push_field_table(L, "err", "ERR Lua redis lib command arguments must be strings or integers");
      return true;
    }
  }
  const RVal r = g_ctx->ks->call(argv, g_ctx->now_ms, g_ctx->now_us);
  push_reply(L, r);
  return r.is_error();
}

int redis_call(lua_State* L) {
  if (call_command(L)) return lua_error(L);
  return 1;
}

int redis_pcall(lua_State* L) {
  call_command(L);
  return 1;
}

// redis.error_reply() / redis.status_reply(): one string argument.
bool reply_table(lua_State* L, bool error) {
  if (lua_gettop(L) != 1 || lua_type(L, 1) != LUA_TSTRING) {
    push_field_table(L, "err", "ERR wrong number or type of arguments");
    return false;
  }
  size_t n = 0;
  const char* s = lua_tolstring(L, 1, &n);
  if (!error) {
    push_field_table(L, "ok", std::string(s, n));
  } else if (n > 0 && s[0] == '-') {
    push_field_table(L, "err", error_text(s + 1, n - 1, true));
  } else {
    push_field_table(L, "err", error_text(s, n, true));
  }
  return true;
}

int redis_error_reply(lua_State* L) {
  reply_table(L, true);
  return 1;
}

int redis_status_reply(lua_State* L) {
  reply_table(L, false);
  return 1;
}

int redis_sha1hex(lua_State* L) {
  if (lua_gettop(L) != 1) {
    lua_pushstring(L, "wrong number of arguments");
    return lua_error(L);
  }
  size_t n = 0;
  const char* s = lua_tolstring(L, 1, &n);
  char hex[41] = {};
  {
    const std::string sha = script_sha1(std::string(s ? s : "", s ? n : 0));
    std::memcpy(hex, sha.data(), 40);
  }
  lua_pushstring(L, hex);
  return 1;
}

int redis_noop(lua_State* L) {
  (void)L;
  return 0;
}

int redis_true(lua_State* L) {
  lua_pushboolean(L, 1);
  return 1;
}

void set_fn(lua_State* L, const char* name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, -2, name);
}

}  // namespace

void lua_set_call_ctx(LuaCallCtx* ctx) { g_ctx = ctx; }

std::string lua_one_line(const char* s, size_t n) {
  std::string t(s, n);
  for (char& c : t) c = (c == '\r' || c == '\n') ? ' ' : c;
  return t;
}

// A string field of the table at `idx`, or nullptr.
const char* lua_string_field(lua_State* L, int idx, const char* name, size_t* len) {
  lua_pushstring(L, name);
  lua_rawget(L, idx);
  const char* s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, len) : nullptr;
  lua_pop(L, 1);  // the string stays alive: the table still refers to it
  return s;
}

// The script's value at `idx` as Redis 7.0 replies it in RESP2
// (luaReplyToRedisReply).
RVal lua_to_reply(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return RVal::bulk(std::string(s, n));
    }
    case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? RVal::integer(1) : RVal::nil();
    case LUA_TNUMBER: return RVal::integer(to_reply_int(lua_tonumber(L, idx)));
    case LUA_TTABLE: break;
    default: return RVal::nil();
  }
  size_t n = 0;
  if (const char* e = lua_string_field(L, idx, "err", &n)) return RVal::error(lua_one_line(e, n));
  if (const char* ok = lua_string_field(L, idx, "ok", &n)) return RVal::status(lua_one_line(ok, n));
  lua_pushstring(L, "double");
  lua_rawget(L, idx);
  if (lua_type(L, -1) == LUA_TNUMBER) {
    const double d = lua_tonumber(L, -1);
    lua_pop(L, 1);
    return RVal::bulk(lua_num_arg(d));
  }
  lua_pop(L, 1);
  if (!lua_checkstack(L, 2)) model_fail("lua: script reply nested too deep");
  RVal out = RVal::array();
  for (int j = 1;; ++j) {
    lua_rawgeti(L, idx, j);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      break;
    }
    out.a.push_back(lua_to_reply(L, lua_gettop(L)));
    lua_pop(L, 1);
  }
  return out;
}

void lua_open_redis(lua_State* L) {
  lua_newtable(L);
  set_fn(L, "call", redis_call);
  set_fn(L, "pcall", redis_pcall);
  set_fn(L, "error_reply", redis_error_reply);
  set_fn(L, "status_reply", redis_status_reply);
  set_fn(L, "sha1hex", redis_sha1hex);
  set_fn(L, "log", redis_noop);
  set_fn(L, "set_repl", redis_noop);
  set_fn(L, "replicate_commands", redis_true);
  const char* const levels[] = {"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"};
  for (int i = 0; i < 4; ++i) {
    lua_pushnumber(L, i);
    lua_setfield(L, -2, levels[i]);
  }
  lua_setglobal(L, "redis");
}

}  // namespace sim
}  // namespace edgelock
