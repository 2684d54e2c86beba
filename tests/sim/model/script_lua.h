#pragma once
// What the native scripts share (private to tests/sim/model): Lua values as
// our scripts see redis.call() replies, Lua's conversions, and redis.call()
// with Redis's way of raising its errors.

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/fail.h"
#include "model/keyspace.h"
#include "model/rval.h"
#include "model/scripts.h"

namespace edgelock {
namespace sim {
namespace lua {

// A Lua value as our scripts see redis.call() replies and arguments.
struct LVal {
  enum Kind : uint8_t { kNil, kFalse, kNum, kStr, kTable } kind = kNil;
  double num = 0;
  std::string str;
  RVal table;  // the reply a table came from (arrays)

  static LVal from(const RVal& r) {
    LVal v;
    switch (r.type) {
      case RType::kInt:
        v.kind = kNum;
        v.num = static_cast<double>(r.i);
        break;
      case RType::kBulk:
        v.kind = kStr;
        v.str = r.s;
        break;
      case RType::kNil:
      case RType::kNilArray: v.kind = kFalse; break;
      default:
        v.kind = kTable;
        v.table = r;
        break;
    }
    return v;
  }
  bool truthy() const { return kind != kNil && kind != kFalse; }
  bool is_str(const std::string& s) const { return kind == kStr && str == s; }
  // Element i (1-based) of an array table; nil past the end.
  LVal at(size_t i) const {
    if (kind != kTable || table.type != RType::kArray || i == 0 || i > table.a.size())
      return LVal();
    return from(table.a[i - 1]);
  }
};

// Lua's tonumber(v): nil unless a number or a numeric string.
inline bool tonum(const LVal& v, double* out) {
  if (v.kind == LVal::kNum) {
    *out = v.num;
    return true;
  }
  return v.kind == LVal::kStr && lua_tonumber(v.str, out);
}

// Redis returns a Lua number as (long long) of it; out of range that is
// INT64_MIN on x86-64 (the servers the differential test runs against), so
// the model says the same on every host instead of relying on the cast.
inline int64_t to_reply_int(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(d);
}

// An integer reply that became a Lua number (a double) and was returned:
// above 2^53 it is rounded, as the real server does.
inline int64_t via_lua(int64_t v) { return to_reply_int(static_cast<double>(v)); }

inline std::string suffix(const ScriptRun& s, int line) {
  return " script: " + s.sha + ", on @user_script:" + std::to_string(line) + ".";
}

// An error reply from redis.call() raised as a script error.
inline RVal raise(const ScriptRun& s, int line, const RVal& err) {
  return RVal::error(err.s + suffix(s, line));
}

// A Lua runtime error ("attempt to compare nil with number").
inline RVal lua_error(const ScriptRun& s, int line, const char* msg) {
  return RVal::error("ERR user_script:" + std::to_string(line) + ": " + msg + suffix(s, line));
}

inline RVal call(ScriptRun& s, std::vector<std::string> argv) {
  return s.ks->call(argv, s.now_ms, s.now_us);
}

inline const std::string& key(const ScriptRun& s, size_t i) {
  if (i == 0 || i > s.keys->size()) model_fail("script %s: KEYS[%zu] missing", s.sha.c_str(), i);
  return (*s.keys)[i - 1];
}

inline const std::string& arg(const ScriptRun& s, size_t i) {
  if (i == 0 || i > s.args->size()) model_fail("script %s: ARGV[%zu] missing", s.sha.c_str(), i);
  return (*s.args)[i - 1];
}

inline double arg_num(const ScriptRun& s, size_t i) {
  double d = 0;
  if (!lua_tonumber(arg(s, i), &d))
    model_fail("script %s: ARGV[%zu] not a number", s.sha.c_str(), i);
  return d;
}

#define SIM_CALL(var, line, ...)           \
  const RVal var = call(s, {__VA_ARGS__}); \
  if (var.is_error()) return raise(s, line, var)

inline RVal ints(std::initializer_list<int64_t> v) {
  RVal r = RVal::array();
  for (int64_t x : v) r.a.push_back(RVal::integer(x));
  return r;
}

// The natives of reentrant_scripts.h and rate_scripts.h (scripts_more.cc).
RVal re_acquire(ScriptRun& s);
RVal re_release(ScriptRun& s);
RVal re_extend(ScriptRun& s);
RVal cooldown(ScriptRun& s);
RVal quota(ScriptRun& s);
RVal rate_peek(ScriptRun& s);

}  // namespace lua
}  // namespace sim
}  // namespace edgelock
