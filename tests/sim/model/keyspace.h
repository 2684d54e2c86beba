#pragma once
// The simulated Redis's data: one database of strings, lists, hashes and
// sorted sets, each key with an optional expiry on the server's own clock.
// Commands are executed as Redis 7.0 does for the arguments the library
// sends (and the differential test checks that), with Redis's exact error
// texts. Expired keys vanish when touched (Redis's lazy expiry; the active
// expiry cycle cannot be observed apart from memory use).

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/rval.h"

namespace edgelock {
namespace sim {

enum class KeyType : uint8_t { kString, kList, kHash, kZset };

struct Entry {
  KeyType type = KeyType::kString;
  std::string str;
  std::deque<std::string> list;
  std::map<std::string, std::string> hash;
  std::map<std::string, double> scores;              // zset: member -> score
  std::set<std::pair<double, std::string>> ordered;  // zset: (score, member)
  int64_t expire_at_ms = -1;                         // -1: no expiry
};

extern const char kWrongType[];

/// Redis's strict integer parse (string2ll): no sign but '-', no leading
/// zeros, no spaces, within int64.
bool redis_int(const std::string& s, int64_t* out);
/// Redis's double parse for scores and bounds ("-inf", "+inf", "(1.5").
bool redis_double(const std::string& s, double* out);
/// A double as Redis prints it in RESP2 ("%.17g").
std::string redis_double_text(double d);

class Keyspace {
 public:
  /// Runs one data command at server time `now_ms`. Commands the model does
  /// not know make it stop loudly (a new command in the library must be
  /// modelled before it can be simulated).
  RVal call(const std::vector<std::string>& argv, int64_t now_ms, int64_t now_us);

  /// The entry of a live key (nullptr if absent or expired at now_ms),
  /// without touching it.
  const Entry* peek(const std::string& key, int64_t now_ms) const;
  /// Every live key at now_ms (sorted).
  std::vector<std::string> live_keys(int64_t now_ms) const;
  /// Every stored entry, expired ones not yet removed included.
  const std::map<std::string, Entry>& entries() const { return keys_; }
  void clear() { keys_.clear(); }
  size_t size() const { return keys_.size(); }
  /// Keys with an LPUSH since the last take_pushed() (BLPOP wake-ups).
  std::vector<std::string> take_pushed();

 private:
  Entry* find(const std::string& key, int64_t now_ms);
  Entry* find_typed(const std::string& key, KeyType t, int64_t now_ms, RVal* err);
  void drop_if_empty(const std::string& key, const Entry& e);

  RVal get(const std::vector<std::string>& a, int64_t now);
  RVal set(const std::vector<std::string>& a, int64_t now);
  RVal del(const std::vector<std::string>& a, int64_t now);
  RVal pttl(const std::vector<std::string>& a, int64_t now);
  RVal pexpire(const std::vector<std::string>& a, int64_t now);
  RVal incr(const std::vector<std::string>& a, int64_t now);
  RVal push(const std::vector<std::string>& a, int64_t now, bool left);
  RVal ltrim(const std::vector<std::string>& a, int64_t now);
  RVal lpop(const std::vector<std::string>& a, int64_t now);
  RVal hset(const std::vector<std::string>& a, int64_t now);
  RVal hget(const std::vector<std::string>& a, int64_t now);
  RVal hmget(const std::vector<std::string>& a, int64_t now);
  RVal hdel(const std::vector<std::string>& a, int64_t now);
  RVal hincrby(const std::vector<std::string>& a, int64_t now);
  RVal exists(const std::vector<std::string>& a, int64_t now);
  RVal zadd(const std::vector<std::string>& a, int64_t now);
  RVal zscore(const std::vector<std::string>& a, int64_t now);
  RVal zcard(const std::vector<std::string>& a, int64_t now);
  RVal zrange(const std::vector<std::string>& a, int64_t now);
  RVal zremrangebyscore(const std::vector<std::string>& a, int64_t now);
  RVal zrem(const std::vector<std::string>& a, int64_t now);

  std::map<std::string, Entry> keys_;
  std::vector<std::string> pushed_;
};

/// A Lua number as redis.call() passes it on ("%.17g").
std::string lua_num_arg(double d);

}  // namespace sim
}  // namespace edgelock
