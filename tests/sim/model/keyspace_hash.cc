// The hash and key commands of the simulated Redis that FairLock's queue
// scripts use (HDEL, HINCRBY, EXISTS), with Redis 7.0's replies and errors.
#include <cctype>

#include "model/keyspace.h"

namespace edgelock {
namespace sim {

namespace {

const char kNotInt[] = "ERR value is not an integer or out of range";

RVal arity(const std::string& cmd) {
  std::string lower;
  for (char c : cmd)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return RVal::error("ERR wrong number of arguments for '" + lower + "' command");
}

}  // namespace

RVal Keyspace::hdel(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kHash, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::integer(0);
  int64_t gone = 0;
  for (size_t i = 2; i < a.size(); ++i) gone += static_cast<int64_t>(e->hash.erase(a[i]));
  drop_if_empty(a[1], *e);
  return RVal::integer(gone);
}

// Redis checks the increment first, then the key's type, then the field's
// value, then the overflow.
RVal Keyspace::hincrby(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 4) return arity(a[0]);
  int64_t incr = 0;
  if (!redis_int(a[3], &incr)) return RVal::error(kNotInt);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kHash, now, &err);
  if (err.is_error()) return err;
  int64_t old = 0;
  if (e) {
    auto it = e->hash.find(a[2]);
    if (it != e->hash.end() && !redis_int(it->second, &old)) {
      return RVal::error("ERR hash value is not an integer");
    }
  }
  if ((incr < 0 && old < 0 && incr < INT64_MIN - old) ||
      (incr > 0 && old > 0 && incr > INT64_MAX - old)) {
    return RVal::error("ERR increment or decrement would overflow");
  }
  if (!e) {
    Entry fresh;
    fresh.type = KeyType::kHash;
    e = &(keys_[a[1]] = std::move(fresh));
  }
  e->hash[a[2]] = std::to_string(old + incr);
  return RVal::integer(old + incr);
}

// Each key named counts, a repeated one as often as it is named.
RVal Keyspace::exists(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 2) return arity(a[0]);
  int64_t n = 0;
  for (size_t i = 1; i < a.size(); ++i) n += find(a[i], now) ? 1 : 0;
  return RVal::integer(n);
}

}  // namespace sim
}  // namespace edgelock
