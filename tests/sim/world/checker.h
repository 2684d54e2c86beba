#pragma once
// The invariant checker, run after every event of a simulated run.
//
// Workloads report what the library told them (claims with their end, fences,
// admissions, keeper reports, operations that must leave nothing behind);
// the servers report every request they executed. The checker compares the
// two with the servers' data in true time:
//   exclusion  no two clients claim a lock (more than N a semaphore) at once
//   truth      a claim implies the server (a majority) holds the token until
//              at least the claim's end
//   fencing    fences of successive grants of a key strictly increase
//   rate       a RateLimiter admits at most M per window of server time
//              (limit 1: never twice within one window length), and every
//              admission a client reports happened there
//   keeper     a loss is reported no later than the validity end
//   liveness   with faults stopped, a free lock with waiters is granted within
//              a bound; no client retries a busy key faster than its backoff
//   cleanup    after a release or a failed acquire, once the requests sent by
//              then have run, no key of ours remains (unless a partition,
//              reset or restart kept a request from the server)

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "model/rval.h"

namespace edgelock {
namespace sim {

class World;

enum class LeaseKind : uint8_t { kLock, kQuorum, kPermit, kReentrant };

// Why a lease left on a server after its release was not a cleanup
// violation. Only cleanup is ever excused; truth, exclusion and fencing are
// checked for every lease. Counted per run (RunStats::excused).
enum class Excuse : uint8_t {
  kUnreachable,     // a partition, reset or restart may have kept the release away
  kLateAcquire,     // an acquire given up on granted late: lapses by its TTL
  kTimeoutGap,      // a request given up on was not queued before the release
  kQuorumMinority,  // a quorum release reached a majority; a minority keeps its TTL
  kRefused,         // the server refused the release (error reply)
};
constexpr const char* kExcuseNames[] = {"unreachable", "late acquire", "timeout gap",
                                        "quorum minority", "refused release"};

/// Every lease key a workload may use (a client picks among a primitive's
/// keys: "L", "L1", "L2" ...); a key starting with 'S' is a semaphore's.
constexpr const char* kLeaseKeys[] = {"L", "L1", "L2", "S", "S1", "S2", "R", "R1", "R2", "Q", "F"};
inline bool semaphore_key(const std::string& key) { return !key.empty() && key[0] == 'S'; }

/// What a lease is on the server: the key and our token in it.
struct LeaseRef {
  LeaseKind kind = LeaseKind::kLock;
  std::string key;
  std::string token;   // lock token, permit id, or reentrant owner
  std::string handle;  // reentrant handle nonce
};

class Checker {
 public:
  explicit Checker(World& w);

  // --- From workloads (client fibers).
  /// The library says `client` holds `ref` until true time `end` (slot:
  /// one per lease a client may hold at once).
  void claim(int client, int slot, const LeaseRef& ref, int64_t end);
  void unclaim(int client, int slot);
  /// Moves a claim's end earlier (never later).
  void shorten(int client, int slot, int64_t end);
  /// The end of the current claim (0 if none).
  int64_t claim_end(int client, int slot) const;
  /// An acquire returned ok with this fence, for the lease of `token`.
  void granted(int client, const std::string& key, uint64_t fence, const std::string& token);
  /// A RateLimiter let this client in.
  void admitted(int client, const std::string& key);
  /// The client is inside a blocking acquire/enter/take of `key` (liveness).
  void waiting(int client, const std::string& key, bool on);
  /// After a release or a failed acquire: once every request the client
  /// has sent by now has run, `ref` must be gone from every server.
  void must_clean(int client, const LeaseRef& ref, int64_t op_start);
  /// A keeper (or any holder loop) learnt of a loss, or renewed, at now;
  /// `belief_end` is the end of validity it last relied on.
  void keeper_report(int client, int slot, bool lost, int64_t belief_end, bool paused_since);
  /// The minimum retry delay of this client's primitive (polling check).
  void set_retry_min(int client, int64_t ns) { retry_min_[client] = ns; }
  /// Waiters on `key` may keep it free this much longer (FairLock: a dead
  /// waiter at the head of the queue keeps its place for its waiter timeout).
  void set_wait_slack(const std::string& key, int64_t ns) {
    if (ns > wait_slack_[key]) wait_slack_[key] = ns;
  }
  /// The process died: it waits for nothing any more.
  void died(int client);

  // --- From the world.
  /// `closed_at` >= 0: it came on a connection the client had closed then
  /// (a command it gave up on, run late).
  void on_request(int server, int client, const std::vector<std::string>& argv, const RVal& reply,
                  bool blocked, int64_t closed_at);
  void on_server_restart(int server, bool data_lost);
  /// A busy reply to an acquire reached the client; the client sends bytes.
  void on_busy_reply(int client);
  void on_client_send(int client, int server, int conn, const std::string& bytes);
  void after_event();
  void at_end();
  void violation(const char* kind, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  bool failed() const { return failed_; }
  const std::string& failure_kind() const { return failure_kind_; }

 private:
  struct Claim {
    LeaseRef ref;
    int64_t end = 0;
  };
  struct Obligation {
    int client;
    LeaseRef ref;
    int64_t op_start;
    // Per server: the connections with requests still to settle and the
    // bytes each had sent; done[s] once they all settled and s was checked.
    std::vector<std::vector<std::pair<int, uint64_t>>> pending;
    std::vector<bool> done;
  };
  struct Poll {
    int64_t busy_at = -1;  // first busy reply since the last attempt (client clock)
    bool woken = false;    // a BLPOP was sent since
    int fast = 0;          // consecutive retries faster than the backoff
  };

  // The true time until which `server` holds `ref` (-1: not at all).
  int64_t held_until(int server, const LeaseRef& ref) const;
  void check_claims();
  void check_truth(int client, const Claim& c);
  void check_obligations();
  bool exempt(const Obligation& o, int server) const;
  bool refused(const Obligation& o, int server) const;
  bool straggler(const Obligation& o, int server) const;
  void note_release_written(int client, int server, int conn, const std::string& token);
  void check_liveness();
  void check_starving(const std::string& key, int waiting, bool free, int64_t bound);
  void on_script(int server, int client, const std::string& name,
                 const std::vector<std::string>& argv, const RVal& reply, int64_t closed_at);
  // An admission by kRateScript (argv: EVALSHA sha 1 key limit window).
  void on_rate_admit(int client, const std::vector<std::string>& argv, const RVal& reply,
                     int64_t now_ms);
  // Counts a cleanup the checker excused, by kind (RunStats::excused).
  void excuse(Excuse kind) const;
  bool excused(Excuse kind) const;  // excuse(kind), then true

  World& w_;
  std::map<std::pair<int, int>, Claim> claims_;
  std::map<std::string, uint64_t> last_fence_;
  std::map<std::string, int> last_fence_client_;
  std::map<std::pair<int, std::string>, uint64_t> client_admits_, server_admits_;
  std::map<std::string, int64_t> once_last_;  // limit 1: key -> server ms of last admission
  std::map<std::pair<std::string, int64_t>, int>
      rate_window_;  // (key, window end ms) -> admissions
  std::map<std::string, std::map<int, bool>> waiters_;
  std::map<std::string, int64_t> starved_since_;
  std::map<std::string, int64_t> asked_at_;  // last instant a client waited on the key
  std::map<int, Poll> polls_;
  std::string acquire_sha_[5];
  std::map<std::string, int64_t> wait_slack_;
  std::map<int, int64_t> retry_min_;
  std::vector<Obligation> obligations_;
  // Releases written per (client, server), by token; and those the server
  // refused with an error reply (NOSCRIPT after the round, OOM, ...).
  struct ReleaseNote {
    bool refused = false;
    int64_t last_written = -1;
  };
  std::map<std::pair<int, int>, std::map<std::string, ReleaseNote>> releases_;
  // An acquire given up on ran after a later success with the token: the
  // lease stays checked (re-arms never shorten it), its cleanup is excused
  // (finding C: nothing queued behind it).
  std::map<std::pair<int, std::string>, bool> late_acquire_;
  std::map<std::pair<int, std::string>, int64_t> token_first_sent_;  // first request with it
  std::map<std::pair<int, std::string>, int64_t> last_release_;      // last release written
  std::map<std::pair<int, std::string>, int64_t> fresh_exec_;  // last run on an open connection
  // Quorum: the connection to each server that had a request in flight
  // when the client began releasing a token (the release must be queued
  // behind it), and the tokens whose release each connection carried.
  std::map<std::tuple<int, std::string, int>, int> must_queue_;  // (client, token, server) -> conn
  std::map<int, std::set<std::string>> released_on_conn_;
  // Per connection, where its last request other than AUTH and SELECT
  // ends in the bytes sent: a reconnect's handshake in flight is no request
  // the release must be queued behind (a release waiting for that connect
  // is written after it anyway).
  std::map<int, uint64_t> request_end_;
  bool data_lost_ = false;
  bool failed_ = false;
  std::string failure_kind_;
};

}  // namespace sim
}  // namespace edgelock
