#pragma once
// edgelock: the back end one --url names. redis://, rediss:// and unix://
// give one Connection; redis-sentinel:// the primary found through Redis
// Sentinel; redis-cluster:// the primary owning the key's slot. All three
// are an edgelock::Backend, so every subcommand is written once against it.
//
// The password comes from the URL, else from EDGELOCK_PASSWORD, else from
// REDISCLI_AUTH (redis-cli's variable), so it need not be on the command
// line; EDGELOCK_SENTINEL_PASSWORD authenticates to the sentinels.

#include <memory>

#include "cli.h"

namespace cli {

enum class Topology { kServer, kSentinel, kCluster };

// By the URL's scheme (an unknown scheme is kServer: its parser says why).
Topology topology_of(const char* url);
// "redis-sentinel://", "redis-cluster://" or "redis://" (for messages).
const char* scheme_name(Topology t);

// The password from the environment (EDGELOCK_PASSWORD, else
// REDISCLI_AUTH), or null.
const char* env_password();

// The connection options every back end gets: timeouts derived from the
// TTL, TLS files.
edgelock::ConnectionOptions connection_options(const Options& o);

// Sets up a single-server connection (no I/O): the URL, plus the
// environment's password if the URL has none. Reports errors; returns
// kExitOk or the exit code.
int init_server(const Options& o, const char* url, edgelock::Connection* conn);
// Exit 2 naming the first --tls-* file that cannot be read, else kExitOk.
int check_tls_files(const Options& o);
// Connects now (reporting the error only if `report`).
int connect_server(edgelock::Connection* conn, bool report);

class Target {
 public:
  Target() = default;
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  // Sets up the back end for `url` and makes its first connection within
  // the connect budget (a Sentinel: finds the primary; a Cluster: reads
  // the slot map and connects the primaries), so an unreachable back end
  // exits 3 even when the wait is forever. Reports errors; returns kExitOk
  // or the exit code.
  int open(const Options& o, const char* url);

  Topology topology() const { return topology_; }
  edgelock::Backend& backend();
  // The single connection (redis://, rediss://, unix://), else null.
  edgelock::Connection* direct() { return topology_ == Topology::kServer ? &conn_ : nullptr; }
  edgelock::Clock& clock() { return backend().clock(); }

  // --stats: the back end's counters (connection, or sentinel / cluster
  // plus the connection serving `key`).
  void print_stats(const char* key);

 private:
  int open_sentinel(const Options& o, const char* url);
  int open_cluster(const Options& o, const char* url);

  Topology topology_ = Topology::kServer;
  edgelock::Connection conn_;
  std::unique_ptr<edgelock::Sentinel> sentinel_;
  std::unique_ptr<edgelock::Cluster> cluster_;
};

// --stats: "edgelock: stats WHAT: name=value ..." on stderr.
void print_stats(const char* what, const edgelock::Metrics& m);

// The connection serving `key` on the back end the last Target::open() set
// up (for messages; an unset one before that).
const edgelock::Connection& serving(edgelock::Bytes key);

// "host:port" of a connection, for messages.
void where_of(const edgelock::Connection& conn, char* buf, int size);

// One error line for a failed operation on `conn` (with `text` the back
// end's last error): "<doing> failed at host:port: <cause>: <text>", or
// the transport's own line for a failed connect. Records the outcome.
int report_error(const edgelock::Connection& conn, const char* text, edgelock::Status s,
                 const char* doing);

}  // namespace cli
