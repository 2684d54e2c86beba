#include "diff/diff_ops.h"

#include <cstdlib>

#include "lease/rate_scripts.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {
namespace sim {

namespace {

uint64_t next(uint64_t* s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

size_t pick(uint64_t* s, size_t n) { return static_cast<size_t>(next(s) % n); }

template <typename T, size_t N>
const T& one_of(uint64_t* s, const T (&a)[N]) {
  return a[pick(s, N)];
}

const char* const kLockKeys[] = {"lk", "{lk2}"};
const char* const kTokens[] = {"tokA", "tokB", "tokC"};
const char* const kTtls[] = {"1", "3", "7", "400", "10000", "60000"};

std::string fence_of(const std::string& k) {
  return k[0] == '{' ? "fence:" + k : "{" + k + "}:fence";
}
std::string wake_of(const std::string& k) { return k[0] == '{' ? "wake:" + k : "{" + k + "}:wake"; }

DiffOp script_op(const char* label, const Script& s, std::vector<std::string> keys,
                 std::vector<std::string> args, Timed timed) {
  DiffOp op;
  op.label = label;
  op.script = &s;
  op.timed = timed;
  op.argv = {"EVALSHA", std::string(s.sha1, 40), std::to_string(keys.size())};
  op.argv.insert(op.argv.end(), keys.begin(), keys.end());
  op.argv.insert(op.argv.end(), args.begin(), args.end());
  return op;
}

DiffOp plain(const char* label, std::vector<std::string> argv, Timed timed = Timed::kNone) {
  DiffOp op;
  op.label = label;
  op.argv = std::move(argv);
  op.timed = timed;
  return op;
}

DiffOp setup(const char* label, std::vector<std::string> argv) {
  DiffOp op = plain(label, std::move(argv));
  op.setup = true;
  return op;
}

DiffOp lock_op(uint64_t* s) {
  const std::string k = one_of(s, kLockKeys);
  const std::string tok = one_of(s, kTokens);
  switch (pick(s, 7)) {
    case 0:
      return script_op("acquire", detail::kAcquireScript, {k, fence_of(k), wake_of(k)},
                       {tok, one_of(s, kTtls)}, Timed::kIfNotPositive);
    case 1: {
      if (pick(s, 4) == 0) {
        return script_op("acquire/no-wake", detail::kAcquireScript, {k, fence_of(k)},
                         {tok, one_of(s, kTtls)}, Timed::kIfNotPositive);
      }
      const char* const proposals[] = {
          "1", "2", "5", "8", "100", "9007199254740993", "9223372036854775807"};
      return script_op("acquire/quorum", detail::kQuorumAcquireScript, {k, fence_of(k)},
                       {tok, one_of(s, kTtls), one_of(s, proposals)}, Timed::kFirst);
    }
    case 2:
      return pick(s, 2)
                 ? script_op("release", detail::kReleaseScript, {k, wake_of(k)},
                             {tok, one_of(s, kTtls)}, Timed::kNone)
                 : script_op("release/quorum", detail::kReleaseScript, {k}, {tok}, Timed::kNone);
    case 3: {
      const bool add = pick(s, 2) != 0;
      // Both modes may return the key's PTTL (set: max(PTTL, ms)).
      return script_op("extend", detail::kExtendScript, {k},
                       {tok, one_of(s, kTtls), add ? "add" : "set"}, Timed::kWhole);
    }
    case 4: return script_op("owned", detail::kOwnedScript, {k}, {tok}, Timed::kIfNotNegative);
    case 5: {
      const char* const fences[] = {"1", "5", "100", "9007199254740993"};
      return script_op("fence-raise", detail::kFenceRaiseScript, {k, fence_of(k)},
                       {tok, one_of(s, fences)}, Timed::kNone);
    }
    default: return plain("PTTL", {"PTTL", k}, Timed::kIfNotNegative);
  }
}

DiffOp sem_op(uint64_t* s) {
  const char* const ids[] = {"p1", "p2", "p3", ""};
  const char* const ns[] = {"1", "2"};
  const std::string id = one_of(s, ids);
  switch (pick(s, 4)) {
    case 0:
      return script_op("sem-acquire", detail::kSemAcquireScript, {"sem"},
                       {id, one_of(s, kTtls), one_of(s, ns)}, Timed::kSecondIfZero);
    case 1: return script_op("sem-release", detail::kSemReleaseScript, {"sem"}, {id}, Timed::kNone);
    case 2:
      return script_op("sem-extend", detail::kSemExtendScript, {"sem"}, {id, one_of(s, kTtls)},
                       Timed::kNone);
    default: return script_op("sem-count", detail::kSemCountScript, {"sem"}, {}, Timed::kNone);
  }
}

DiffOp reentrant_op(uint64_t* s) {
  const char* const owners[] = {"o1", "o2"};
  const char* const handles[] = {"h1", "h2"};
  const char* const depths[] = {"0", "1", "2", "3"};
  const std::string o = one_of(s, owners), h = one_of(s, handles);
  const std::string k = "re";
  switch (pick(s, 3)) {
    case 0: {
      const char* const want[] = {"1", "2", "3"};
      return script_op("re-acquire", detail::kReentrantAcquireScript, {k, fence_of(k)},
                       {o, one_of(s, kTtls), one_of(s, want), h, one_of(s, depths)},
                       Timed::kSecondIfZero);
    }
    case 1:
      return script_op("re-release", detail::kReentrantReleaseScript, {k},
                       {o, one_of(s, depths), one_of(s, kTtls), h, one_of(s, depths)},
                       Timed::kNone);
    default:
      return script_op("re-extend", detail::kReentrantExtendScript, {k}, {o, one_of(s, kTtls), h},
                       Timed::kNone);
  }
}

std::string queue_of(const std::string& k) {
  return k[0] == '{' ? "queue:" + k : "{" + k + "}:queue";
}
std::string wake_list(const std::string& k, const std::string& seq) {
  return k[0] == '{' ? "w:" + seq + ":" + k : "{" + k + "}:w:" + seq;
}

// FairLock's steps, and the commands its scripts use on queues in any state.
DiffOp fair_op(uint64_t* s) {
  const std::string k = one_of(s, kLockKeys), q = queue_of(k);
  const std::string tok = one_of(s, kTokens);
  const char* const seqs[] = {"0", "1", "2", "3"};
  const char* const wts[] = {"1", "7", "400", "60000"};
  const std::string seq = one_of(s, seqs), wt = one_of(s, wts);
  switch (pick(s, 8)) {
    case 0:
    case 1:
      return script_op("fair-acquire", detail::kFairAcquireScript, {k, fence_of(k), q},
                       {tok, one_of(s, kTtls), pick(s, 4) ? wt : "-" + wt},
                       Timed::kFirstIfNotPositive);
    case 2:
      return script_op("fair-release", detail::kFairReleaseScript, {k, q, wake_list(k, seq)},
                       {tok, seq, wt}, Timed::kNone);
    case 3:
      return script_op("fair-leave", detail::kFairLeaveScript, {k, q}, {tok, wt}, Timed::kNone);
    case 4:
      return script_op("fair-wake", detail::kFairWakeScript, {k, wake_list(k, seq)}, {wt},
                       Timed::kNone);
    case 5: {
      // (A huge "seq" would make every script walk that many arrivals.)
      const char* const incrs[] = {"1", "-1", "abc", "9223372036854775807"};
      const char* const fields[] = {"head", "s:1"};
      if (pick(s, 2)) return plain("HINCRBY", {"HINCRBY", q, "seq", pick(s, 2) ? "1" : "-1"});
      return plain("HINCRBY", {"HINCRBY", q, one_of(s, fields), one_of(s, incrs)});
    }
    case 6: return plain("HDEL", {"HDEL", q, "w:" + tok, "s:" + seq, "seq"});
    default: return plain("EXISTS", {"EXISTS", k, q, k, wake_list(k, seq)});
  }
}

// A queue in a state the scripts must cope with.
DiffOp fair_state_op(uint64_t* s) {
  const std::string q = queue_of(one_of(s, kLockKeys));
  const char* const seqs[] = {"abc", "5", "-2", "1.5"};
  switch (pick(s, 4)) {
    case 0: return setup("queue-seq", {"HSET", q, pick(s, 2) ? "seq" : "head", one_of(s, seqs)});
    case 1:
      return setup("queue-entry", {"HSET", q, "w:tokB", pick(s, 2) ? "1:x" : "9:1", "s:1", "tokC"});
    case 2: return setup("wrongtype-queue", {"RPUSH", q, "x"});
    default: return setup("wrongtype-wake", {"HSET", "{lk}:w:1", "f", "v"});
  }
}

DiffOp rate_op(uint64_t* s) {
  const char* const ms[] = {"1", "2", "3"};
  switch (pick(s, 5)) {
    case 0:
      return script_op("rate-1", detail::kRateScript, {"cd"}, {"1", one_of(s, kTtls)},
                       Timed::kThird);
    case 1:
      return script_op("rate", detail::kRateScript, {"qt"}, {one_of(s, ms), one_of(s, kTtls)},
                       Timed::kThird);
    case 2:
      return script_op("rate-peek", detail::kRatePeekScript, {pick(s, 2) ? "qt" : "cd"}, {},
                       Timed::kFirst);
    case 3: return plain("DEL", {"DEL", pick(s, 2) ? "qt" : "cd"});
    default: return plain("PTTL", {"PTTL", pick(s, 2) ? "qt" : "cd"}, Timed::kIfNotNegative);
  }
}

// Puts a key into a state a request must cope with.
DiffOp state_op(uint64_t* s) {
  const char* const keys[] = {"lk",  "{lk}:fence", "{lk}:wake",  "wake:{lk2}", "fence:{lk2}",
                              "sem", "re",         "{re}:fence", "cd",         "qt"};
  const std::string k = one_of(s, keys);
  switch (pick(s, 14)) {
    case 0: return setup("wrongtype-list", {"RPUSH", k, "x"});
    case 1: return setup("wrongtype-hash", {"HSET", k, "f", "v"});
    case 2: return setup("wrongtype-zset", {"ZADD", k, "1", "m"});
    case 3:
    case 4: {
      const char* const vals[] = {"9223372036854775807",
                                  "9223372036854775806",
                                  "9007199254740991",
                                  "9007199254740992",
                                  "abc",
                                  "1.5",
                                  "-3",
                                  "7"};
      return setup("string-value", {"SET", k, one_of(s, vals)});
    }
    case 5: return setup("no-ttl", {"SET", k, one_of(s, kTokens)});
    case 6:
    case 7:
    case 8: return setup("del", {"DEL", k});
    case 9: return setup("SCRIPT FLUSH", {"SCRIPT", "FLUSH"});
    case 10:
    case 11: {
      DiffOp op;
      op.label = "sleep";
      op.sleep_ms = 2 + static_cast<int>(pick(s, 8));
      return op;
    }
    case 12: return plain("BLPOP", {"BLPOP", pick(s, 2) ? "{lk}:wake" : "wake:{lk2}", "0.001"});
    default: return plain("WAIT", {"WAIT", "0", "0"});
  }
}

// Scripts that are not the library's: the Lua binding itself (conversions
// both ways, redis.call/pcall errors, error_reply/status_reply, globals,
// compile errors) against the real server's, on keys in any state.
const char* const kBindingProbes[] = {
    "return {1, 2.9, -2.9, 'a', true, false, {3, {4}}, nil, 5}",
    "return {2^53 + 1, 1e20, -1e20, 0/0, -0.5}",
    "return redis.status_reply('FINE')",
    "return redis.error_reply('MYERR boom')",
    "return redis.error_reply('boom')",
    "return {ok = 'x', err = 'E y'}",
    "return {double = 3.5}",
    "return redis.pcall('INCR', KEYS[1])",
    "return redis.call('INCR', KEYS[1])",
    "local r = redis.pcall('GET', KEYS[1])\n"
    "if type(r) == 'table' then return {type(r), r.err or r.ok or ''} end\n"
    "return {type(r), tostring(r)}",
    "local r = redis.call('SET', KEYS[1], ARGV[1])\nreturn {r.ok, type(r)}",
    "return redis.call('ZRANGE', KEYS[1], 0, -1)",
    "return redis.call('HMGET', KEYS[1], 'f', 'g')",
    "return redis.call('PTTL', KEYS[1]) >= -2",
    "return x",
    "y = 1",
    "return redis.call()",
    "return redis.call('GET', {})",
    "return 1 < nil",
    "return (",
    "return tostring(0.1 + 0.2) .. ' ' .. tostring(2^63) .. ' ' .. string.format('%5.2f', 1/3)",
    "return redis.sha1hex(ARGV[1])",
    "return #KEYS + #ARGV * 10",
    "return #redis.call('TIME')",
};

DiffOp binding_op(uint64_t* s) {
  const char* const keys[] = {"lk", "{lk}:fence", "{lk}:wake", "sem", "re", "cd"};
  return plain("lua-binding",
               {"EVAL", one_of(s, kBindingProbes), "1", one_of(s, keys), one_of(s, kTokens)});
}

}  // namespace

DiffOp next_op(uint64_t* s) {
  switch (pick(s, 13)) {
    case 11: return fair_op(s);
    case 12: return pick(s, 3) ? fair_op(s) : fair_state_op(s);
    case 10: return binding_op(s);
    case 0:
    case 1:
    case 2: return lock_op(s);
    case 3:
    case 4: return sem_op(s);
    case 5:
    case 6: return reentrant_op(s);
    case 7: return rate_op(s);
    default: return state_op(s);
  }
}

std::vector<std::string> eval_form(const DiffOp& op) {
  std::vector<std::string> v = op.argv;
  v[0] = "EVAL";
  v[1] = std::string(op.script->body, op.script->len);
  return v;
}

namespace {

bool near(int64_t a, int64_t b, int64_t tol) { return a - b <= tol && b - a <= tol; }

bool same(const RVal& a, const RVal& b) { return encode(a) == encode(b); }

bool int_timed(const RVal& m, const RVal& r, int64_t tol, bool (*ok)(int64_t)) {
  return m.type == RType::kInt && r.type == RType::kInt && ok(m.i) && ok(r.i) &&
         near(m.i, r.i, tol);
}

bool elem_timed(const RVal& m, const RVal& r, size_t i, int64_t tol) {
  if (m.type != RType::kArray || r.type != RType::kArray || m.a.size() != r.a.size() ||
      i >= m.a.size()) {
    return false;
  }
  for (size_t k = 0; k < m.a.size(); ++k) {
    if (k == i) {
      if (m.a[k].type != RType::kInt || r.a[k].type != RType::kInt ||
          !near(m.a[k].i, r.a[k].i, tol)) {
        return false;
      }
    } else if (!same(m.a[k], r.a[k])) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool replies_agree(const RVal& m, const RVal& r, Timed timed, int64_t tol) {
  if (same(m, r)) return true;
  switch (timed) {
    case Timed::kNone: return false;
    case Timed::kIfNotPositive: return int_timed(m, r, tol, [](int64_t v) { return v <= 0; });
    case Timed::kIfNotNegative: return int_timed(m, r, tol, [](int64_t v) { return v >= 0; });
    case Timed::kWhole: return int_timed(m, r, tol, [](int64_t v) { return v > 0; });
    case Timed::kSecondIfZero:
      return m.type == RType::kArray && !m.a.empty() && m.a[0].type == RType::kInt &&
             m.a[0].i == 0 && elem_timed(m, r, 1, tol);
    case Timed::kFirst: return elem_timed(m, r, 0, tol);
    case Timed::kFirstIfNotPositive:
      return m.type == RType::kArray && !m.a.empty() && m.a[0].type == RType::kInt &&
             m.a[0].i <= 0 && elem_timed(m, r, 0, tol);
    case Timed::kThird: return elem_timed(m, r, 2, tol);
  }
  return false;
}

}  // namespace sim
}  // namespace edgelock
