#include "model/scripts.h"

#include <cmath>
#include <cstring>

#include "lock_scripts.h"
#include "model/fail.h"
#include "model/script_lua.h"
#include "rate_scripts.h"
#include "reentrant_scripts.h"
#include "semaphore_scripts.h"

namespace edgelock {
namespace sim {

namespace {

using namespace lua;  // NOLINT: the helpers every native uses

// --- lock_scripts.h

RVal lock_acquire(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  std::string px = arg(s, 2);
  if (!cur.is_nil()) {
    SIM_CALL(t, 4, "PTTL", key(s, 1));
    if (cur.s != arg(s, 1)) return RVal::integer(t.i < 0 ? 0 : -t.i);
    if (static_cast<double>(t.i) > arg_num(s, 2)) px = lua_num_arg(static_cast<double>(t.i));
  }
  const RVal f = call(s, {"INCR", key(s, 2)});
  if (f.is_error()) return RVal::error(f.s + " (edgelock fence counter)");
  SIM_CALL(set, 15, "SET", key(s, 1), arg(s, 1), "PX", px);
  if (s.keys->size() >= 3) {
    SIM_CALL(del, 16, "DEL", key(s, 3));
  }
  return RVal::integer(via_lua(f.i));  // f went through a Lua number
}

// The counter as the script reads it: 0 if absent, the number if it is a
// string of digits (with an optional minus), else "no number" (nil or false
// in Lua: another type, or "1.5"/"abc"/"007x"), which leaves it to INCR.
bool fence_counter(const RVal& c, double* n) {
  *n = 0;
  if (c.is_nil()) return true;
  if (c.type != RType::kBulk || c.s.empty()) return false;
  size_t i = c.s[0] == '-' ? 1 : 0;
  if (i == c.s.size()) return false;
  for (; i < c.s.size(); ++i) {
    if (c.s[i] < '0' || c.s[i] > '9') return false;
  }
  return lua_tonumber(c.s, n);
}

RVal lock_quorum_acquire(ScriptRun& s) {
  SIM_CALL(cur, 1, "GET", key(s, 1));
  double n = 0;
  const bool has_n = fence_counter(call(s, {"GET", key(s, 2)}), &n);
  std::string px = arg(s, 2);
  if (!cur.is_nil()) {
    SIM_CALL(t, 7, "PTTL", key(s, 1));
    if (cur.s != arg(s, 1)) return ints({t.i < 0 ? 0 : -t.i, has_n ? to_reply_int(n) : 0});
    if (static_cast<double>(t.i) > arg_num(s, 2)) px = lua_num_arg(static_cast<double>(t.i));
  }
  double f = 0;
  const bool has_f = lua_tonumber(arg(s, 3), &f);
  RVal r;
  int64_t c = 0;
  if (has_n && has_f && f > n + 1) {
    r = call(s, {"SET", key(s, 2), arg(s, 3)});
    c = to_reply_int(f);
  } else {
    r = call(s, {"INCR", key(s, 2)});
    c = via_lua(r.i);
  }
  if (r.is_error()) return RVal::error(r.s + " (edgelock fence counter)");
  SIM_CALL(set, 26, "SET", key(s, 1), arg(s, 1), "PX", px);
  return RVal::integer(c);
}

bool owner_is(ScriptRun& s, const RVal& cur) {
  return cur.type == RType::kBulk && cur.s == arg(s, 1);
}

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
  SIM_CALL(old, 6, "ZSCORE", key(s, 1), arg(s, 1));
  double exp = now + arg_num(s, 2);
  double old_exp = 0;
  if (!old.is_nil()) {
    if (tonum(LVal::from(old), &old_exp) && old_exp > exp) exp = old_exp;
  } else {
    SIM_CALL(card, 9, "ZCARD", key(s, 1));
    if (static_cast<double>(card.i) >= arg_num(s, 3)) {
      SIM_CALL(first, 10, "ZRANGE", key(s, 1), "0", "0", "WITHSCORES");
      double f = 0;
      if (!tonum(LVal::from(first).at(2), &f)) {
        return lua_error(s, 11, "bad argument #1 to 'tonumber' (value expected)");
      }
      return ints({0, to_reply_int(f - now)});
    }
  }
  SIM_CALL(add, 13, "ZADD", key(s, 1), lua_num_arg(exp), arg(s, 1));
  const RVal keep = sem_keep_key(s, 14, now);
  if (keep.is_error()) return keep;
  SIM_CALL(card, 16, "ZCARD", key(s, 1));
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

#undef SIM_CALL

// The SHA-1 of each script as the native code above implements it. A
// script edited in src/ no longer matches: update its function, then this.
const NativeEntry kNatives[] = {
    {"28af9e2b3f4d301d17422d2d9f4a3e45e938d83d", "kAcquireScript", lock_acquire},
    {"f28189e89bea8c28be1ae465f43535973376f823", "kReleaseScript", lock_release},
    {"cd5e918bf03fa875e4935b14295c461140b5fbdc", "kExtendScript", lock_extend},
    {"380422aa17f819ccee84d7fd4bd41dfe8e2e767a", "kOwnedScript", lock_owned},
    {"688323a3d51c0220009b50a0457291e7bf947814", "kFenceRaiseScript", lock_fence_raise},
    {"a3c1d26f44075feee1ec5302aa1944bc0816abaf", "kQuorumAcquireScript", lock_quorum_acquire},
    {"d755c0dbcfb09ba8024301ce8be8bd84ff63c371", "kSemAcquireScript", sem_acquire},
    {"bc130feb3bcf37912ae26d90e4acf697f5d533f9", "kSemReleaseScript", sem_release},
    {"83181694a7ab989bc31afafe154d3396a9cbd470", "kSemExtendScript", sem_extend},
    {"9f62d8d3de8d731becc1cf6ad0b1c1ef2016cb58", "kSemCountScript", sem_count},
    {"bc6355bbd79e3e33e8b86c68bc4d7c9f1e1f62a8", "kReentrantAcquireScript", re_acquire},
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
    {"kQuorumAcquireScript", &detail::kQuorumAcquireScript},
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
