#include "model/keyspace.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/fail.h"

namespace edgelock {
namespace sim {

const char kWrongType[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

namespace {

const char kNotInt[] = "ERR value is not an integer or out of range";
const char kSyntax[] = "ERR syntax error";

RVal arity(const std::string& cmd) {
  std::string lower;
  for (char c : cmd)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return RVal::error("ERR wrong number of arguments for '" + lower + "' command");
}

std::string upper(const std::string& s) {
  std::string u;
  for (char c : s) u.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return u;
}

}  // namespace

bool redis_int(const std::string& s, int64_t* out) {
  const size_t n = s.size();
  if (n == 0 || n > 20) return false;
  size_t i = 0;
  bool neg = false;
  if (n == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  if (s[0] == '-') {
    neg = true;
    i = 1;
    if (n == 1) return false;
  }
  if (s[i] < '1' || s[i] > '9') return false;
  unsigned long long v = 0;
  for (; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const unsigned d = static_cast<unsigned>(s[i] - '0');
    if (v > (~0ULL - d) / 10) return false;
    v = v * 10 + d;
  }
  if (neg) {
    if (v > 9223372036854775808ULL) return false;
    *out = v == 9223372036854775808ULL ? INT64_MIN : -static_cast<int64_t>(v);
    return true;
  }
  if (v > 9223372036854775807ULL) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

bool redis_double(const std::string& s, double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  if (s == "-inf") {
    *out = -INFINITY;
    return true;
  }
  if (s == "+inf" || s == "inf") {
    *out = INFINITY;
    return true;
  }
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || std::isnan(d) || errno == ERANGE) return false;
  *out = d;
  return true;
}

std::string redis_double_text(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

std::string lua_num_arg(double d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}

Entry* Keyspace::find(const std::string& key, int64_t now_ms) {
  auto it = keys_.find(key);
  if (it == keys_.end()) return nullptr;
  if (it->second.expire_at_ms >= 0 && now_ms > it->second.expire_at_ms) {
    keys_.erase(it);
    return nullptr;
  }
  return &it->second;
}

const Entry* Keyspace::peek(const std::string& key, int64_t now_ms) const {
  auto it = keys_.find(key);
  if (it == keys_.end()) return nullptr;
  if (it->second.expire_at_ms >= 0 && now_ms > it->second.expire_at_ms) return nullptr;
  return &it->second;
}

std::vector<std::string> Keyspace::live_keys(int64_t now_ms) const {
  std::vector<std::string> out;
  for (const auto& kv : keys_) {
    if (peek(kv.first, now_ms)) out.push_back(kv.first);
  }
  return out;
}

std::vector<std::string> Keyspace::take_pushed() {
  std::vector<std::string> out;
  out.swap(pushed_);
  return out;
}

Entry* Keyspace::find_typed(const std::string& key, KeyType t, int64_t now_ms, RVal* err) {
  Entry* e = find(key, now_ms);
  if (e && e->type != t) {
    *err = RVal::error(kWrongType);
    return nullptr;
  }
  return e;
}

void Keyspace::drop_if_empty(const std::string& key, const Entry& e) {
  const bool empty = (e.type == KeyType::kList && e.list.empty()) ||
                     (e.type == KeyType::kHash && e.hash.empty()) ||
                     (e.type == KeyType::kZset && e.scores.empty());
  if (empty) keys_.erase(key);
}

RVal Keyspace::call(const std::vector<std::string>& argv, int64_t now, int64_t now_us) {
  const std::string cmd = upper(argv[0]);
  if (cmd == "GET") return get(argv, now);
  if (cmd == "SET") return set(argv, now);
  if (cmd == "DEL") return del(argv, now);
  if (cmd == "PTTL") return pttl(argv, now);
  if (cmd == "PEXPIRE") return pexpire(argv, now);
  if (cmd == "INCR") return incr(argv, now);
  if (cmd == "LPUSH") return push(argv, now, true);
  if (cmd == "RPUSH") return push(argv, now, false);
  if (cmd == "LTRIM") return ltrim(argv, now);
  if (cmd == "LPOP") return lpop(argv, now);
  if (cmd == "HSET") return hset(argv, now);
  if (cmd == "HGET") return hget(argv, now);
  if (cmd == "HMGET") return hmget(argv, now);
  if (cmd == "HDEL") return hdel(argv, now);
  if (cmd == "HINCRBY") return hincrby(argv, now);
  if (cmd == "EXISTS") return exists(argv, now);
  if (cmd == "ZADD") return zadd(argv, now);
  if (cmd == "ZSCORE") return zscore(argv, now);
  if (cmd == "ZCARD") return zcard(argv, now);
  if (cmd == "ZRANGE") return zrange(argv, now);
  if (cmd == "ZREMRANGEBYSCORE") return zremrangebyscore(argv, now);
  if (cmd == "ZREM") return zrem(argv, now);
  if (cmd == "TIME") {
    return RVal::array({RVal::bulk(std::to_string(now_us / 1000000)),
                        RVal::bulk(std::to_string(now_us % 1000000))});
  }
  if (cmd == "FLUSHALL") {
    keys_.clear();
    return RVal::ok();
  }
  model_fail("the simulated Redis does not know the command '%s': model it in tests/sim/model",
             argv[0].c_str());
  return RVal::error("ERR unknown command");
}

RVal Keyspace::get(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 2) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kString, now, &err);
  if (err.is_error()) return err;
  return e ? RVal::bulk(e->str) : RVal::nil();
}

RVal Keyspace::set(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 3) return arity(a[0]);
  bool nx = false, xx = false;
  int64_t px = -1;
  for (size_t i = 3; i < a.size(); ++i) {
    const std::string o = upper(a[i]);
    if (o == "NX" && !xx) {
      nx = true;
    } else if (o == "XX" && !nx) {
      xx = true;
    } else if (o == "PX" && px < 0 && i + 1 < a.size()) {
      if (!redis_int(a[++i], &px)) return RVal::error(kNotInt);
      if (px <= 0) return RVal::error("ERR invalid expire time in 'set' command");
    } else {
      return RVal::error(kSyntax);
    }
  }
  Entry* old = find(a[1], now);
  if ((nx && old) || (xx && !old)) return RVal::nil();
  Entry e;
  e.type = KeyType::kString;
  e.str = a[2];
  e.expire_at_ms = px > 0 ? now + px : -1;
  keys_[a[1]] = std::move(e);
  return RVal::ok();
}

RVal Keyspace::del(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 2) return arity(a[0]);
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    if (find(a[i], now)) {
      keys_.erase(a[i]);
      ++n;
    }
  }
  return RVal::integer(n);
}

RVal Keyspace::pttl(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 2) return arity(a[0]);
  const Entry* e = find(a[1], now);
  if (!e) return RVal::integer(-2);
  if (e->expire_at_ms < 0) return RVal::integer(-1);
  const int64_t t = e->expire_at_ms - now;
  return RVal::integer(t < 0 ? 0 : t);
}

RVal Keyspace::pexpire(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 3) return arity(a[0]);
  int64_t ms = 0;
  if (!redis_int(a[2], &ms)) return RVal::error(kNotInt);
  if ((ms > 0 && ms > INT64_MAX - now) || (ms < 0 && ms < INT64_MIN + now)) {
    return RVal::error("ERR invalid expire time in 'pexpire' command");
  }
  Entry* e = find(a[1], now);
  if (!e) return RVal::integer(0);
  const int64_t when = now + ms;
  if (when <= now) {
    keys_.erase(a[1]);
    return RVal::integer(1);
  }
  e->expire_at_ms = when;
  return RVal::integer(1);
}

RVal Keyspace::incr(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 2) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kString, now, &err);
  if (err.is_error()) return err;
  int64_t v = 0;
  if (e && !redis_int(e->str, &v)) return RVal::error(kNotInt);
  if (v == INT64_MAX) return RVal::error("ERR increment or decrement would overflow");
  ++v;
  if (!e) {
    Entry fresh;
    fresh.type = KeyType::kString;
    e = &(keys_[a[1]] = std::move(fresh));
  }
  e->str = std::to_string(v);
  return RVal::integer(v);
}

RVal Keyspace::push(const std::vector<std::string>& a, int64_t now, bool left) {
  if (a.size() < 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kList, now, &err);
  if (err.is_error()) return err;
  if (!e) {
    Entry fresh;
    fresh.type = KeyType::kList;
    e = &(keys_[a[1]] = std::move(fresh));
  }
  for (size_t i = 2; i < a.size(); ++i) {
    if (left) {
      e->list.push_front(a[i]);
    } else {
      e->list.push_back(a[i]);
    }
  }
  pushed_.push_back(a[1]);
  return RVal::integer(static_cast<int64_t>(e->list.size()));
}

RVal Keyspace::ltrim(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 4) return arity(a[0]);
  int64_t start = 0, stop = 0;
  if (!redis_int(a[2], &start) || !redis_int(a[3], &stop)) return RVal::error(kNotInt);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kList, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::ok();
  const int64_t len = static_cast<int64_t>(e->list.size());
  if (start < 0) start += len;
  if (stop < 0) stop += len;
  if (start < 0) start = 0;
  std::deque<std::string> kept;
  if (start <= stop && start < len) {
    if (stop >= len) stop = len - 1;
    for (int64_t i = start; i <= stop; ++i) kept.push_back(e->list[static_cast<size_t>(i)]);
  }
  e->list.swap(kept);
  drop_if_empty(a[1], *e);
  return RVal::ok();
}

RVal Keyspace::lpop(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 2) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kList, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::nil();
  RVal v = RVal::bulk(e->list.front());
  e->list.pop_front();
  drop_if_empty(a[1], *e);
  return v;
}

RVal Keyspace::hset(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 4 || a.size() % 2 != 0) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kHash, now, &err);
  if (err.is_error()) return err;
  if (!e) {
    Entry fresh;
    fresh.type = KeyType::kHash;
    e = &(keys_[a[1]] = std::move(fresh));
  }
  int64_t added = 0;
  for (size_t i = 2; i + 1 < a.size(); i += 2) {
    if (e->hash.find(a[i]) == e->hash.end()) ++added;
    e->hash[a[i]] = a[i + 1];
  }
  return RVal::integer(added);
}

RVal Keyspace::hget(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kHash, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::nil();
  auto it = e->hash.find(a[2]);
  return it == e->hash.end() ? RVal::nil() : RVal::bulk(it->second);
}

RVal Keyspace::hmget(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kHash, now, &err);
  if (err.is_error()) return err;
  RVal out = RVal::array();
  for (size_t i = 2; i < a.size(); ++i) {
    if (!e) {
      out.a.push_back(RVal::nil());
      continue;
    }
    auto it = e->hash.find(a[i]);
    out.a.push_back(it == e->hash.end() ? RVal::nil() : RVal::bulk(it->second));
  }
  return out;
}

}  // namespace sim
}  // namespace edgelock
