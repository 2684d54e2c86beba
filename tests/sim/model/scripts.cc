#include "model/scripts.h"

#include <cmath>
#include <cstring>

#include "lock_scripts.h"
#include "model/fail.h"
#include "rate_scripts.h"
#include "reentrant_scripts.h"
#include "semaphore_scripts.h"

namespace edgelock {
namespace sim {

namespace {

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
      case RType::kNilArray:
        v.kind = kFalse;
        break;
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
    if (kind != kTable || table.type != RType::kArray || i == 0 || i > table.a.size()) return LVal();
    return from(table.a[i - 1]);
  }
};

// Lua's tonumber(v): nil unless a number or a numeric string.
bool tonum(const LVal& v, double* out) {
  if (v.kind == LVal::kNum) {
    *out = v.num;
    return true;
  }
  return v.kind == LVal::kStr && lua_tonumber(v.str, out);
}

int64_t to_reply_int(double d) { return static_cast<int64_t>(d); }

// An integer reply that became a Lua number (a double) and was returned:
// above 2^53 it is rounded, as the real server does.
int64_t via_lua(int64_t v) { return to_reply_int(static_cast<double>(v)); }

std::string suffix(const ScriptRun& s, int line) {
  return " script: " + s.sha + ", on @user_script:" + std::to_string(line) + ".";
}

// An error reply from redis.call() raised as a script error.
RVal raise(const ScriptRun& s, int line, const RVal& err) {
  return RVal::error(err.s + suffix(s, line));
}

// A Lua runtime error ("attempt to compare nil with number").
RVal lua_error(const ScriptRun& s, int line, const char* msg) {
  return RVal::error("ERR user_script:" + std::to_string(line) + ": " + msg + suffix(s, line));
}

RVal call(ScriptRun& s, std::vector<std::string> argv) {
  return s.ks->call(argv, s.now_ms, s.now_us);
}

const std::string& key(const ScriptRun& s, size_t i) {
  if (i == 0 || i > s.keys->size()) model_fail("script %s: KEYS[%zu] missing", s.sha.c_str(), i);
  return (*s.keys)[i - 1];
}

const std::string& arg(const ScriptRun& s, size_t i) {
  if (i == 0 || i > s.args->size()) model_fail("script %s: ARGV[%zu] missing", s.sha.c_str(), i);
  return (*s.args)[i - 1];
}

double arg_num(const ScriptRun& s, size_t i) {
  double d = 0;
  if (!lua_tonumber(arg(s, i), &d)) model_fail("script %s: ARGV[%zu] not a number", s.sha.c_str(), i);
  return d;
}

#define SIM_CALL(var, line, ...)                  \
  const RVal var = call(s, {__VA_ARGS__});        \
  if (var.is_error()) return raise(s, line, var)

RVal ints(std::initializer_list<int64_t> v) {
  RVal r = RVal::array();
  for (int64_t x : v) r.a.push_back(RVal::integer(x));
  return r;
}

// --- lock_scripts.h

RVal lock_acquire(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  if (cur.type == RType::kBulk && cur.s != arg(s, 1)) {
    SIM_CALL(t, 3, "PTTL", key(s, 1));
    return RVal::integer(t.i < 0 ? 0 : -t.i);
  }
  const RVal f = call(s, {"INCR", key(s, 2)});
  if (f.is_error()) return RVal::error(f.s + " (edgelock fence counter)");
  SIM_CALL(set, 11, "SET", key(s, 1), arg(s, 1), "PX", arg(s, 2));
  if (s.keys->size() >= 3) {
    SIM_CALL(del, 12, "DEL", key(s, 3));
  }
  return RVal::integer(via_lua(f.i));  // f went through a Lua number
}

bool owner_is(ScriptRun& s, const RVal& cur) { return cur.type == RType::kBulk && cur.s == arg(s, 1); }

RVal lock_release(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  if (!owner_is(s, cur)) return RVal::integer(0);
  if (s.keys->size() >= 2) {
    const RVal pushed = call(s, {"LPUSH", key(s, 2), "1"});
    if (pushed.type == RType::kInt) {
      SIM_CALL(trim, 3, "LTRIM", key(s, 2), "0", "0");
      SIM_CALL(exp, 4, "PEXPIRE", key(s, 2), arg(s, 2));
    }
  }
  SIM_CALL(del, 6, "DEL", key(s, 1));
  return RVal::integer(1);
}

RVal lock_extend(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  if (!owner_is(s, cur)) return RVal::integer(0);
  double ttl = arg_num(s, 2);
  if (arg(s, 3) == "add") {
    SIM_CALL(p, 4, "PTTL", key(s, 1));
    if (p.i > 0) ttl += static_cast<double>(p.i);
  }
  SIM_CALL(exp, 7, "PEXPIRE", key(s, 1), lua_num_arg(ttl));
  return RVal::integer(to_reply_int(ttl));
}

RVal lock_owned(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  if (!owner_is(s, cur)) return RVal::integer(-3);
  SIM_CALL(t, 2, "PTTL", key(s, 1));
  return t;
}

RVal lock_fence_raise(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  if (!owner_is(s, cur)) return RVal::integer(0);
  SIM_CALL(c, 2, "GET", key(s, 2));
  double counter = 0;
  LVal cv = LVal::from(c);
  if (!cv.truthy()) cv = LVal::from(RVal::bulk("0"));
  if (!tonum(cv, &counter)) counter = 0;
  if (arg_num(s, 2) > counter) {
    SIM_CALL(set, 3, "SET", key(s, 2), arg(s, 2));
  }
  return RVal::integer(1);
}

// --- semaphore_scripts.h

// The prelude: TIME, now in ms, expired permits dropped. `base` is the line
// of the TIME call.
RVal sem_prelude(ScriptRun& s, int base, double* now) {
  SIM_CALL(t, base, "TIME");
  double sec = 0, usec = 0;
  tonum(LVal::from(t.a[0]), &sec);
  tonum(LVal::from(t.a[1]), &usec);
  *now = sec * 1000 + std::floor(usec / 1000);
  SIM_CALL(rem, base + 2, "ZREMRANGEBYSCORE", key(s, 1), "-inf", lua_num_arg(*now));
  return RVal::ok();
}

// Keeps the key's TTL at its latest permit. `line` is the ZRANGE's.
RVal sem_keep_key(ScriptRun& s, int line, double now) {
  SIM_CALL(last, line, "ZRANGE", key(s, 1), "-1", "-1", "WITHSCORES");
  const LVal l = LVal::from(last);
  double score = 0;
  if (l.at(2).truthy() && tonum(l.at(2), &score)) {
    SIM_CALL(exp, line + 1, "PEXPIRE", key(s, 1), lua_num_arg(score - now + 1));
  }
  return RVal::ok();
}

RVal sem_acquire(ScriptRun& s) {
  if (arg(s, 1).empty()) return ints({-1, 0});
  double now = 0;
  const RVal pre = sem_prelude(s, 2, &now);
  if (pre.is_error()) return pre;
  const double exp = now + arg_num(s, 2);
  SIM_CALL(score, 6, "ZSCORE", key(s, 1), arg(s, 1));
  if (score.is_nil()) {
    SIM_CALL(card, 7, "ZCARD", key(s, 1));
    if (static_cast<double>(card.i) >= arg_num(s, 3)) {
      SIM_CALL(first, 8, "ZRANGE", key(s, 1), "0", "0", "WITHSCORES");
      double f = 0;
      if (!tonum(LVal::from(first).at(2), &f)) {
        return lua_error(s, 9, "bad argument #1 to 'tonumber' (value expected)");
      }
      return ints({0, to_reply_int(f - now)});
    }
  }
  SIM_CALL(add, 12, "ZADD", key(s, 1), lua_num_arg(exp), arg(s, 1));
  const RVal keep = sem_keep_key(s, 13, now);
  if (keep.is_error()) return keep;
  SIM_CALL(card, 15, "ZCARD", key(s, 1));
  return ints({1, card.i});
}

RVal sem_release(ScriptRun& s) {
  double now = 0;
  const RVal pre = sem_prelude(s, 1, &now);
  if (pre.is_error()) return pre;
  SIM_CALL(rem, 4, "ZREM", key(s, 1), arg(s, 1));
  return rem;
}

RVal sem_extend(ScriptRun& s) {
  double now = 0;
  const RVal pre = sem_prelude(s, 1, &now);
  if (pre.is_error()) return pre;
  SIM_CALL(score, 4, "ZSCORE", key(s, 1), arg(s, 1));
  if (score.is_nil()) return RVal::integer(0);
  SIM_CALL(add, 5, "ZADD", key(s, 1), "XX", lua_num_arg(now + arg_num(s, 2)), arg(s, 1));
  const RVal keep = sem_keep_key(s, 6, now);
  if (keep.is_error()) return keep;
  return RVal::integer(to_reply_int(arg_num(s, 2)));
}

RVal sem_count(ScriptRun& s) {
  double now = 0;
  const RVal pre = sem_prelude(s, 1, &now);
  if (pre.is_error()) return pre;
  SIM_CALL(card, 4, "ZCARD", key(s, 1));
  return card;
}

// --- reentrant_scripts.h

RVal re_acquire_new(ScriptRun& s, double w) {
  if (w != 1) return ints({-1, 0});
  SIM_CALL(g, 5, "GET", key(s, 2));
  LVal gv = LVal::from(g);
  if (!gv.truthy()) gv = LVal::from(RVal::bulk("0"));
  double c = 0;
  if (!tonum(gv, &c) || c < 0 || c >= 9007199254740992.0) {
    return RVal::error("ERR bad fence counter");
  }
  SIM_CALL(f, 8, "INCR", key(s, 2));
  SIM_CALL(hs, 9, "HSET", key(s, 1), "owner", arg(s, 1), "handle", arg(s, 4), "depth", "1", "fence",
           lua_num_arg(static_cast<double>(f.i)));
  SIM_CALL(exp, 10, "PEXPIRE", key(s, 1), arg(s, 2));
  return ints({1, via_lua(f.i)});
}

RVal re_acquire(ScriptRun& s) {
  const double w = arg_num(s, 3);
  SIM_CALL(h, 2, "HMGET", key(s, 1), "owner", "handle", "depth", "fence");
  const LVal hv = LVal::from(h);
  if (!hv.at(1).truthy()) return re_acquire_new(s, w);
  if (!hv.at(1).is_str(arg(s, 1)) || !hv.at(2).is_str(arg(s, 4))) {
    if (w > 1) return ints({-1, 0});
    SIM_CALL(t, 15, "PTTL", key(s, 1));
    return ints({0, t.i > 0 ? t.i : 0});
  }
  double d = 0, f = 0;
  const bool has_d = tonum(hv.at(3), &d);
  const bool has_f = tonum(hv.at(4), &f);
  if (!has_d || !has_f || d < w - 1 || d > arg_num(s, 5)) {
    return ints({-2, has_d ? to_reply_int(d) : 0});
  }
  SIM_CALL(hs, 19, "HSET", key(s, 1), "depth", lua_num_arg(w));
  SIM_CALL(exp, 20, "PEXPIRE", key(s, 1), arg(s, 2));
  return ints({to_reply_int(w), to_reply_int(f)});
}

RVal re_release(ScriptRun& s) {
  SIM_CALL(h, 1, "HMGET", key(s, 1), "owner", "handle", "depth");
  const LVal hv = LVal::from(h);
  if (!hv.at(1).is_str(arg(s, 1)) || !hv.at(2).is_str(arg(s, 4))) return RVal::integer(-1);
  const double w = arg_num(s, 2);
  double d = 0;
  if (!tonum(hv.at(3), &d) || d < w || d > arg_num(s, 5)) return RVal::integer(-2);
  if (w == 0) {
    SIM_CALL(del, 6, "DEL", key(s, 1));
    return RVal::integer(0);
  }
  SIM_CALL(hs, 9, "HSET", key(s, 1), "depth", lua_num_arg(w));
  SIM_CALL(exp, 10, "PEXPIRE", key(s, 1), arg(s, 3));
  return RVal::integer(to_reply_int(w));
}

RVal re_extend(ScriptRun& s) {
  SIM_CALL(o, 1, "HGET", key(s, 1), "owner");
  if (!(o.type == RType::kBulk && o.s == arg(s, 1))) return RVal::integer(0);
  SIM_CALL(h, 2, "HGET", key(s, 1), "handle");
  if (!(h.type == RType::kBulk && h.s == arg(s, 3))) return RVal::integer(0);
  SIM_CALL(exp, 3, "PEXPIRE", key(s, 1), arg(s, 2));
  return RVal::integer(to_reply_int(arg_num(s, 2)));
}

// --- rate_scripts.h

RVal cooldown(ScriptRun& s) {
  SIM_CALL(set, 1, "SET", key(s, 1), "1", "NX", "PX", arg(s, 1));
  if (!set.is_nil()) return ints({1, 0, to_reply_int(arg_num(s, 1))});
  SIM_CALL(t, 4, "PTTL", key(s, 1));
  int64_t left = t.i;
  if (left < 0) {
    SIM_CALL(exp, 6, "PEXPIRE", key(s, 1), arg(s, 1));
    left = to_reply_int(arg_num(s, 1));
  }
  return ints({0, 0, left});
}

RVal quota(ScriptRun& s) {
  const double m = arg_num(s, 1);
  SIM_CALL(g, 2, "GET", key(s, 1));
  LVal gv = LVal::from(g);
  if (!gv.truthy()) gv = LVal::from(RVal::bulk("0"));
  double n = 0;
  if (!tonum(gv, &n)) return lua_error(s, 4, "attempt to compare nil with number");
  int64_t ok = 0;
  if (n < m) {
    SIM_CALL(incr, 5, "INCR", key(s, 1));
    n = static_cast<double>(incr.i);
    ok = 1;
  }
  SIM_CALL(t, 8, "PTTL", key(s, 1));
  int64_t left = t.i;
  if (left < 0) {
    SIM_CALL(exp, 10, "PEXPIRE", key(s, 1), arg(s, 2));
    left = to_reply_int(arg_num(s, 2));
  }
  return ints({ok, to_reply_int(m - n), left});
}

RVal rate_peek(ScriptRun& s) {
  SIM_CALL(t, 1, "PTTL", key(s, 1));
  SIM_CALL(g, 1, "GET", key(s, 1));
  LVal gv = LVal::from(g);
  if (!gv.truthy()) gv = LVal::from(RVal::bulk("0"));
  double n = 0;
  if (!tonum(gv, &n)) return ints({t.i});  // a nil ends a Lua array
  return ints({t.i, to_reply_int(n)});
}

#undef SIM_CALL

// The SHA-1 of each script as the native code above implements it. A
// script edited in src/ no longer matches: update its function, then this.
const NativeEntry kNatives[] = {
    {"8b4c26daa03548e80f319628a0b97966d93e025e", "kAcquireScript", lock_acquire},
    {"f28189e89bea8c28be1ae465f43535973376f823", "kReleaseScript", lock_release},
    {"cd5e918bf03fa875e4935b14295c461140b5fbdc", "kExtendScript", lock_extend},
    {"380422aa17f819ccee84d7fd4bd41dfe8e2e767a", "kOwnedScript", lock_owned},
    {"688323a3d51c0220009b50a0457291e7bf947814", "kFenceRaiseScript", lock_fence_raise},
    {"749a893dde4dfa8752fd45ca6b0230daca2b6d0f", "kSemAcquireScript", sem_acquire},
    {"bc130feb3bcf37912ae26d90e4acf697f5d533f9", "kSemReleaseScript", sem_release},
    {"83181694a7ab989bc31afafe154d3396a9cbd470", "kSemExtendScript", sem_extend},
    {"9f62d8d3de8d731becc1cf6ad0b1c1ef2016cb58", "kSemCountScript", sem_count},
    {"5dd0a01394eec8c7d583d79dacba38116a87e524", "kReentrantAcquireScript", re_acquire},
    {"cfc833d56182ea1efe1943ec10198bfc61d7f25c", "kReentrantReleaseScript", re_release},
    {"cde29f193c22ea00d4d04e0437896db3225f6aab", "kReentrantExtendScript", re_extend},
    {"b9e9c02f32a1588378d2f8cf4b507e47f31f95eb", "kCooldownScript", cooldown},
    {"d5111690b494e44a0764e50943b4a6c3b927f833", "kQuotaScript", quota},
    {"2319ec2b1cdc3923feee6eecd27d304695f20857", "kRatePeekScript", rate_peek},
};

struct LibraryScript {
  const char* name;
  const Script* script;
};

const LibraryScript kLibrary[] = {
    {"kAcquireScript", &detail::kAcquireScript},
    {"kReleaseScript", &detail::kReleaseScript},
    {"kExtendScript", &detail::kExtendScript},
    {"kOwnedScript", &detail::kOwnedScript},
    {"kFenceRaiseScript", &detail::kFenceRaiseScript},
    {"kSemAcquireScript", &detail::kSemAcquireScript},
    {"kSemReleaseScript", &detail::kSemReleaseScript},
    {"kSemExtendScript", &detail::kSemExtendScript},
    {"kSemCountScript", &detail::kSemCountScript},
    {"kReentrantAcquireScript", &detail::kReentrantAcquireScript},
    {"kReentrantReleaseScript", &detail::kReentrantReleaseScript},
    {"kReentrantExtendScript", &detail::kReentrantExtendScript},
    {"kCooldownScript", &detail::kCooldownScript},
    {"kQuotaScript", &detail::kQuotaScript},
    {"kRatePeekScript", &detail::kRatePeekScript},
};

}  // namespace

const NativeEntry* find_native(const std::string& sha) {
  for (const NativeEntry& e : kNatives) {
    if (sha == e.sha) return &e;
  }
#ifdef EDGELOCK_SIM_MUTATION
  // A mutation build (scripts/mutations) may change a script's text on
  // purpose: the native function of the same name runs it (the mutation
  // patches that function to match).
  for (const LibraryScript& l : kLibrary) {
    if (sha != l.script->sha1) continue;
    for (const NativeEntry& e : kNatives) {
      if (std::strcmp(e.name, l.name) == 0) return &e;
    }
  }
#endif
  return nullptr;
}

void check_native_scripts() {
#ifdef EDGELOCK_SIM_MUTATION
  return;  // scripts may differ on purpose (find_native() maps them by name)
#endif
  bool bad = false;
  for (const LibraryScript& l : kLibrary) {
    const NativeEntry* e = find_native(l.script->sha1);
    if (!e || std::strcmp(e->name, l.name) != 0) {
      std::fprintf(stderr,
                   "SIMULATOR MODEL FAILURE: %s (sha1 %s) has no native implementation: the "
                   "script changed; update tests/sim/model/scripts.cc to follow it\n",
                   l.name, l.script->sha1);
      bad = true;
    }
  }
  if (bad) std::abort();
}

}  // namespace sim
}  // namespace edgelock
