#include "model/server_core.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "edgelock/script.h"
#include "model/fail.h"
#include "model/lua_engine.h"

namespace edgelock {
namespace sim {

namespace {

std::string upper(const std::string& s) {
  std::string u;
  for (char c : s) u.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return u;
}

std::string lower(const std::string& s) {
  std::string u;
  for (char c : s) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return u;
}

const char kNoScript[] = "NOSCRIPT No matching script. Please use EVAL.";

}  // namespace

std::string script_sha1(const std::string& body) {
  const Script s = make_script(body.c_str());
  return std::string(s.sha1, 40);
}

void ServerCore::open(int conn) {
  Conn c;
  c.authed = password_.empty();
  conns_[conn] = c;
}

void ServerCore::close(int conn) {
  conns_.erase(conn);
  block_order_.erase(std::remove(block_order_.begin(), block_order_.end(), conn),
                     block_order_.end());
}

void ServerCore::restart(bool lose_data) {
  conns_.clear();
  block_order_.clear();
  scripts_.clear();
  if (lose_data) dbs_.clear();
}

void ServerCore::input(int conn, const std::string& bytes, int64_t now_us) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  it->second.in.append(bytes);
  now_us_ = now_us;
  run(conn);
}

void ServerCore::send(int id, const RVal& v) { sink_->reply(id, encode(v)); }

void ServerCore::run(int id) {
  for (;;) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second.blocked) return;
    Conn& c = it->second;
    std::vector<std::string> argv;
    size_t used = 0;
    const RParse p = parse_request(c.in.data(), c.in.size(), &argv, &used);
    if (p == RParse::kIncomplete) return;
    if (p == RParse::kInvalid) model_fail("server: a request that is not an array of bulk strings");
    c.in.erase(0, used);
    if (!execute(id, c, argv, now_us_, used)) return;
  }
}

bool ServerCore::execute(int id, Conn& c, const std::vector<std::string>& argv, int64_t now_us,
                         size_t bytes) {
  RVal injected;
  if (interceptor_ && interceptor_->intercept(id, argv, &injected)) {
    if (observer_) observer_->executed(id, argv, injected, bytes, false);
    send(id, injected);
    return true;
  }
  bool blocks = false;
  const RVal r = dispatch(c, argv, now_us, &blocks);
  ++executed_;
  if (observer_) observer_->executed(id, argv, r, bytes, blocks);
  if (blocks) {
    c.blocked = true;
    block_order_.push_back(id);
    return false;
  }
  // send() may close the connection (a reset that loses the reply): c is
  // gone then, so nothing of it is read after.
  const int db = c.db;
  send(id, r);
  serve_pushed(db, now_us);
  return true;
}

RVal ServerCore::dispatch(Conn& c, const std::vector<std::string>& argv, int64_t now_us,
                          bool* blocks) {
  const std::string cmd = upper(argv[0]);
  if (cmd == "AUTH") {
    if (argv.size() < 2 || argv.size() > 3) {
      return RVal::error("ERR wrong number of arguments for 'auth' command");
    }
    if (password_.empty()) {
      return RVal::error(
          "ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?");
    }
    const bool user_ok = argv.size() == 2 || argv[1] == "default";
    if (!user_ok || argv.back() != password_) {
      return RVal::error("WRONGPASS invalid username-password pair or user is disabled.");
    }
    c.authed = true;
    return RVal::ok();
  }
  if (!c.authed) return RVal::error("NOAUTH Authentication required.");
  if (cmd == "PING") return RVal::status("PONG");
  if (cmd == "SELECT") {
    int64_t db = 0;
    if (argv.size() != 2 || !redis_int(argv[1], &db)) {
      return RVal::error("ERR value is not an integer or out of range");
    }
    if (db < 0 || db > 15) return RVal::error("ERR DB index is out of range");
    c.db = static_cast<int>(db);
    return RVal::ok();
  }
  if (cmd == "EVAL") return eval(c, argv, now_us, false);
  if (cmd == "EVALSHA") return eval(c, argv, now_us, true);
  if (cmd == "SCRIPT") return script(argv);
  if (cmd == "BLPOP") return blpop(c, argv, now_us, blocks);
  if (cmd == "WAIT") {
    int64_t n = 0, ms = 0;
    if (argv.size() != 3 || !redis_int(argv[1], &n) || !redis_int(argv[2], &ms)) {
      return RVal::error("ERR value is not an integer or out of range");
    }
    if (n <= 0) return RVal::integer(0);  // no replicas: nothing to wait for
    c.blocked_wait = true;
    c.block_until_us = ms == 0 ? -1 : now_us + ms * 1000;
    *blocks = true;
    return RVal();
  }
  if (cmd == "ROLE") {
    return RVal::array({RVal::bulk("master"), RVal::integer(0), RVal::array()});
  }
  return dbs_[c.db].call(argv, now_us / 1000, now_us);
}

RVal ServerCore::eval(Conn& c, const std::vector<std::string>& argv, int64_t now_us, bool by_sha) {
  if (argv.size() < 3) {
    return RVal::error(by_sha ? "ERR wrong number of arguments for 'evalsha' command"
                              : "ERR wrong number of arguments for 'eval' command");
  }
  int64_t numkeys = 0;
  if (!redis_int(argv[2], &numkeys))
    return RVal::error("ERR value is not an integer or out of range");
  if (numkeys < 0) return RVal::error("ERR Number of keys can't be negative");
  if (static_cast<size_t>(numkeys) > argv.size() - 3) {
    return RVal::error("ERR Number of keys can't be greater than number of args");
  }
  std::string sha;
  if (by_sha) {
    sha = lower(argv[1]);
    if (sha.size() != 40 || scripts_.count(sha) == 0) return RVal::error(kNoScript);
  } else {
    sha = script_sha1(argv[1]);
    if (scripts_.count(sha) == 0) {
      const RVal err = load(sha, argv[1]);
      if (err.is_error()) return err;
    }
  }
  return lua_run(sha, argv, 3, static_cast<size_t>(numkeys), &dbs_[c.db], now_us);
}

RVal ServerCore::load(const std::string& sha, const std::string& body) {
  std::string err;
  if (!lua_compile(sha, body, &err)) {
    return RVal::error("ERR Error compiling script (new function): " + err);
  }
  scripts_.insert(sha);
  return RVal::ok();
}

RVal ServerCore::script(const std::vector<std::string>& argv) {
  const std::string sub = argv.size() > 1 ? upper(argv[1]) : "";
  if (sub == "FLUSH") {
    scripts_.clear();
    return RVal::ok();
  }
  if (sub == "LOAD" && argv.size() == 3) {
    const std::string sha = script_sha1(argv[2]);
    const RVal err = load(sha, argv[2]);
    return err.is_error() ? err : RVal::bulk(sha);
  }
  if (sub == "EXISTS" && argv.size() > 2) {
    RVal out = RVal::array();
    for (size_t i = 2; i < argv.size(); ++i) {
      out.a.push_back(RVal::integer(scripts_.count(lower(argv[i])) ? 1 : 0));
    }
    return out;
  }
  model_fail("server: SCRIPT %s is not modelled", sub.c_str());
}

RVal ServerCore::blpop(Conn& c, const std::vector<std::string>& argv, int64_t now_us,
                       bool* blocks) {
  if (argv.size() != 3) model_fail("server: BLPOP with more than one key is not modelled");
  char* end = nullptr;
  const long double secs = std::strtold(argv[2].c_str(), &end);
  if (end != argv[2].c_str() + argv[2].size() || std::isnan(secs)) {
    return RVal::error("ERR timeout is not a float or out of range");
  }
  if (secs < 0) return RVal::error("ERR timeout is negative");
  const RVal popped = dbs_[c.db].call({"LPOP", argv[1]}, now_us / 1000, now_us);
  if (popped.is_error()) return popped;
  if (!popped.is_nil()) return RVal::array({RVal::bulk(argv[1]), popped});
  const int64_t ms = static_cast<int64_t>(secs * 1000.0L);
  c.blocked_wait = false;
  c.block_key = argv[1];
  // Redis counts the timeout from its cached ms clock, in whole ms.
  c.block_until_us = secs == 0 ? -1 : (now_us / 1000 + ms) * 1000;
  *blocks = true;
  return RVal();
}

void ServerCore::serve_pushed(int db, int64_t now_us) {
  Keyspace& ks = dbs_[db];
  for (const std::string& key : ks.take_pushed()) {
    for (size_t k = 0; k < block_order_.size();) {
      const int id = block_order_[k];
      Conn& c = conns_[id];
      if (c.blocked_wait || c.db != db || c.block_key != key) {
        ++k;
        continue;
      }
      const RVal popped = ks.call({"LPOP", key}, now_us / 1000, now_us);
      if (popped.type != RType::kBulk) break;  // nothing left for the next waiter
      block_order_.erase(block_order_.begin() + static_cast<long>(k));
      c.blocked = false;
      send(id, RVal::array({RVal::bulk(key), popped}));
      run(id);  // what it pipelined behind the BLPOP runs now
    }
    ks.take_pushed();  // pushes by the waiters' own follow-ups wake nobody else here
  }
}

size_t ServerCore::expire_blocked(int64_t now_us) {
  now_us_ = now_us;
  size_t expired = 0;
  for (size_t k = 0; k < block_order_.size();) {
    const int id = block_order_[k];
    Conn& c = conns_[id];
    if (c.block_until_us < 0 || c.block_until_us >= now_us) {
      ++k;
      continue;
    }
    block_order_.erase(block_order_.begin() + static_cast<long>(k));
    const bool was_wait = c.blocked_wait;
    c.blocked = false;
    c.blocked_wait = false;
    send(id, was_wait ? RVal::integer(0) : RVal::nil_array());  // may close it: c unused after
    ++expired;
    run(id);
  }
  return expired;
}

int64_t ServerCore::next_block_deadline_us() const {
  int64_t best = -1;
  for (int id : block_order_) {
    const int64_t t = conns_.at(id).block_until_us;
    if (t >= 0 && (best < 0 || t < best)) best = t;
  }
  return best;
}

RVal ServerCore::execute_direct(const std::vector<std::string>& argv, int64_t now_us) {
  Conn c;
  c.authed = true;
  bool blocks = false;
  const RVal r = dispatch(c, argv, now_us, &blocks);
  dbs_[0].take_pushed();
  return blocks ? (c.blocked_wait ? RVal::integer(0) : RVal::nil_array()) : r;
}

}  // namespace sim
}  // namespace edgelock
