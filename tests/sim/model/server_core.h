#pragma once
// The simulated Redis server's protocol side: per-connection input
// buffers, request framing, AUTH/SELECT, the script cache with
// EVALSHA/EVAL/SCRIPT and NOSCRIPT, blocking BLPOP and WAIT, and the data
// commands of Keyspace. Time is the caller's (the server's own clock, in
// microseconds of "Unix time"); output goes to a Sink. No I/O, no threads.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/keyspace.h"
#include "model/rval.h"

namespace edgelock {
namespace sim {

class ServerCore {
 public:
  /// Where replies go.
  class Sink {
   public:
    virtual void reply(int conn, const std::string& bytes) = 0;

   protected:
    ~Sink() = default;
  };
  /// May answer a request instead of the server (injected error replies:
  /// OOM, BUSY, LOADING, READONLY). Returns true with *out set to answer.
  class Interceptor {
   public:
    virtual bool intercept(int conn, const std::vector<std::string>& argv, RVal* out) = 0;

   protected:
    ~Interceptor() = default;
  };

  /// Sees every request parsed (`bytes` long) and, unless it blocked, its
  /// reply (a blocked BLPOP/WAIT is reported with `blocked` set).
  class Observer {
   public:
    virtual void executed(int conn, const std::vector<std::string>& argv, const RVal& reply,
                          size_t bytes, bool blocked) = 0;

   protected:
    ~Observer() = default;
  };

  explicit ServerCore(Sink* sink) : sink_(sink) {}

  void set_password(const std::string& pw) { password_ = pw; }
  void set_interceptor(Interceptor* i) { interceptor_ = i; }
  void set_observer(Observer* o) { observer_ = o; }

  /// A new client connection (ids are the caller's, unique while open).
  void open(int conn);
  /// The client went away: its input and any blocking wait are dropped.
  void close(int conn);
  bool is_open(int conn) const { return conns_.count(conn) != 0; }
  /// Bytes from the client; every complete request is executed at `now_us`
  /// unless the connection is blocked. A request that is not RESP closes
  /// nothing here: the model stops loudly (the library never sends one).
  void input(int conn, const std::string& bytes, int64_t now_us);
  /// Times out blocking waits due at `now_us` (BLPOP: nil array; WAIT: 0),
  /// then runs whatever those connections had queued behind them. Returns
  /// how many timed out.
  size_t expire_blocked(int64_t now_us);
  /// The earliest blocking-wait deadline in microseconds, or -1.
  int64_t next_block_deadline_us() const;

  /// Runs one request as if from a fresh, authenticated connection and
  /// returns its reply (the differential test's direct path). A request
  /// that would block returns a nil array at once (BLPOP's timeout reply).
  RVal execute_direct(const std::vector<std::string>& argv, int64_t now_us);

  /// Restart: every connection is gone and the script cache is empty; the
  /// data stays unless `lose_data`.
  void restart(bool lose_data);
  void flush_scripts() { scripts_.clear(); }

  Keyspace& db(int index) { return dbs_[index]; }
  const std::map<int, Keyspace>& dbs() const { return dbs_; }
  /// Requests executed (scripts count once).
  uint64_t executed() const { return executed_; }

 private:
  struct Conn {
    std::string in;
    bool authed = false;
    int db = 0;
    bool blocked = false;
    bool blocked_wait = false;  // WAIT rather than BLPOP
    std::string block_key;
    int64_t block_until_us = -1;  // -1: forever
  };

  void run(int id);
  // Executes one request; false if the connection blocked on it.
  bool execute(int id, Conn& c, const std::vector<std::string>& argv, int64_t now_us, size_t bytes);
  RVal dispatch(Conn& c, const std::vector<std::string>& argv, int64_t now_us, bool* blocks);
  RVal eval(Conn& c, const std::vector<std::string>& argv, int64_t now_us, bool by_sha);
  RVal script(const std::vector<std::string>& argv);
  // Compiles a body into the script cache (an error reply if Lua refuses it).
  RVal load(const std::string& sha, const std::string& body);
  RVal blpop(Conn& c, const std::vector<std::string>& argv, int64_t now_us, bool* blocks);
  void serve_pushed(int db, int64_t now_us);
  void send(int id, const RVal& v);

  Sink* sink_;
  Interceptor* interceptor_ = nullptr;
  Observer* observer_ = nullptr;
  std::string password_;
  std::map<int, Conn> conns_;
  std::map<int, Keyspace> dbs_;
  std::set<std::string> scripts_;  // cached SHA-1s (compiled by model/lua_engine)
  std::vector<int> block_order_;   // blocked connections, oldest first
  int64_t now_us_ = 0;
  uint64_t executed_ = 0;
};

/// The SHA-1 (lower-case hex) of a script body, as Redis computes it.
std::string script_sha1(const std::string& body);

}  // namespace sim
}  // namespace edgelock
