// The natives of reentrant_scripts.h and rate_scripts.h (see scripts.h).
#include "model/script_lua.h"

namespace edgelock {
namespace sim {
namespace lua {

// --- reentrant_scripts.h

static RVal re_acquire_new(ScriptRun& s, double w) {
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
  SIM_CALL(t, 20, "PTTL", key(s, 1));
  if (static_cast<double>(t.i) < arg_num(s, 2)) {
    SIM_CALL(exp, 20, "PEXPIRE", key(s, 1), arg(s, 2));
  }
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

}  // namespace lua
}  // namespace sim
}  // namespace edgelock
