// The sorted-set commands of the simulated Redis (the semaphore's).
#include <cstdio>

#include "model/keyspace.h"

namespace edgelock {
namespace sim {

namespace {

const char kNotFloat[] = "ERR value is not a valid float";
const char kNotInt[] = "ERR value is not an integer or out of range";
const char kSyntax[] = "ERR syntax error";

std::string upper(const std::string& s) {
  std::string u;
  for (char c : s) u.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return u;
}

RVal arity(const std::string& cmd) {
  std::string lower;
  for (char c : cmd)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return RVal::error("ERR wrong number of arguments for '" + lower + "' command");
}

}  // namespace

RVal Keyspace::zadd(const std::vector<std::string>& a, int64_t now) {
  size_t i = 2;
  bool xx = false;
  while (i < a.size() && upper(a[i]) == "XX") {
    xx = true;
    ++i;
  }
  if (a.size() < i + 2 || (a.size() - i) % 2 != 0) {
    return a.size() < 4 ? arity(a[0]) : RVal::error(kSyntax);
  }
  std::vector<double> scores;
  for (size_t k = i; k < a.size(); k += 2) {
    double d = 0;
    if (!redis_double(a[k], &d)) return RVal::error(kNotFloat);
    scores.push_back(d);
  }
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  if (!e) {
    if (xx) return RVal::integer(0);
    Entry fresh;
    fresh.type = KeyType::kZset;
    e = &(keys_[a[1]] = std::move(fresh));
  }
  int64_t added = 0;
  for (size_t k = i, s = 0; k < a.size(); k += 2, ++s) {
    const std::string& m = a[k + 1];
    auto it = e->scores.find(m);
    if (it == e->scores.end()) {
      if (xx) continue;
      e->scores[m] = scores[s];
      e->ordered.insert({scores[s], m});
      ++added;
    } else {
      e->ordered.erase({it->second, m});
      it->second = scores[s];
      e->ordered.insert({scores[s], m});
    }
  }
  return RVal::integer(added);
}

RVal Keyspace::zscore(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::nil();
  auto it = e->scores.find(a[2]);
  return it == e->scores.end() ? RVal::nil() : RVal::bulk(redis_double_text(it->second));
}

RVal Keyspace::zcard(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 2) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  return RVal::integer(e ? static_cast<int64_t>(e->scores.size()) : 0);
}

RVal Keyspace::zrange(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 4) return arity(a[0]);
  int64_t start = 0, stop = 0;
  bool with_scores = false;
  if (a.size() == 5 && upper(a[4]) == "WITHSCORES") {
    with_scores = true;
  } else if (a.size() != 4) {
    return RVal::error(kSyntax);
  }
  if (!redis_int(a[2], &start) || !redis_int(a[3], &stop)) return RVal::error(kNotInt);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  RVal out = RVal::array();
  if (!e) return out;
  const int64_t len = static_cast<int64_t>(e->ordered.size());
  if (start < 0) start += len;
  if (stop < 0) stop += len;
  if (start < 0) start = 0;
  if (start > stop || start >= len) return out;
  if (stop >= len) stop = len - 1;
  int64_t idx = 0;
  for (const auto& p : e->ordered) {
    if (idx >= start && idx <= stop) {
      out.a.push_back(RVal::bulk(p.second));
      if (with_scores) out.a.push_back(RVal::bulk(redis_double_text(p.first)));
    }
    ++idx;
  }
  return out;
}

namespace {

bool score_bound(const std::string& s, double* v, bool* exclusive) {
  *exclusive = !s.empty() && s[0] == '(';
  return redis_double(*exclusive ? s.substr(1) : s, v);
}

}  // namespace

RVal Keyspace::zremrangebyscore(const std::vector<std::string>& a, int64_t now) {
  if (a.size() != 4) return arity(a[0]);
  double lo = 0, hi = 0;
  bool lo_ex = false, hi_ex = false;
  if (!score_bound(a[2], &lo, &lo_ex) || !score_bound(a[3], &hi, &hi_ex)) {
    return RVal::error("ERR min or max is not a float");
  }
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::integer(0);
  int64_t removed = 0;
  for (auto it = e->ordered.begin(); it != e->ordered.end();) {
    const double s = it->first;
    const bool in = (lo_ex ? s > lo : s >= lo) && (hi_ex ? s < hi : s <= hi);
    if (in) {
      e->scores.erase(it->second);
      it = e->ordered.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  drop_if_empty(a[1], *e);
  return RVal::integer(removed);
}

RVal Keyspace::zrem(const std::vector<std::string>& a, int64_t now) {
  if (a.size() < 3) return arity(a[0]);
  RVal err;
  Entry* e = find_typed(a[1], KeyType::kZset, now, &err);
  if (err.is_error()) return err;
  if (!e) return RVal::integer(0);
  int64_t removed = 0;
  for (size_t i = 2; i < a.size(); ++i) {
    auto it = e->scores.find(a[i]);
    if (it == e->scores.end()) continue;
    e->ordered.erase({it->second, a[i]});
    e->scores.erase(it);
    ++removed;
  }
  drop_if_empty(a[1], *e);
  return RVal::integer(removed);
}

}  // namespace sim
}  // namespace edgelock
