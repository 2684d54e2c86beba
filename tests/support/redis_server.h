#pragma once
// Test support: a throwaway redis-server on a free loopback port, started
// by fork/exec and stopped by its PID (never by name, never port 6379).
// Which server runs is one setting, EDGELOCK_TEST_SERVER (server_binary()).

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace edgelock {
namespace test {

/// The server program every test starts: $EDGELOCK_TEST_SERVER, a path or
/// a name looked up in PATH (e.g. /opt/edgelock-servers/valkey-8.1/bin/
/// valkey-server); "redis-server" when unset. Sentinels are this program
/// with --sentinel.
std::string server_binary();
/// The cli next to the server: its name with "-server" replaced by "-cli"
/// (redis-cli, valkey-cli), in the same directory. "" if the server's name
/// does not end in "-server".
std::string cli_binary();
/// The ACL file every server loads with --aclfile (not sentinels, not a
/// server started with its own --requirepass): the absolute
/// path of $EDGELOCK_TEST_ACL, "" when unset. Its first user other than
/// "default" (with a ">password" rule) is who RedisServer::url() connects
/// as, so the library's own traffic runs with only that user's rights; the
/// default user keeps every right for the tests' set-up and inspection
/// (admin_url(), raw_command()).
std::string acl_file();
/// "user:password@" of that user for a URL; "" without an ACL file.
std::string acl_credentials();
/// Whether server_binary() names an executable file: a name with a '/' as
/// given, a bare name looked up in PATH.
bool server_available();
/// Exits 77 (Meson and automake: SKIP) with a message that names the
/// missing program and the setting, unless server_available(). Test
/// programs that start servers call it before their first test (gtest
/// programs by linking support/needs_server.cc).
void exit_unless_server();

class RedisServer {
 public:
  /// Extra arguments go after the defaults (e.g. {"--requirepass", "pw"}).
  explicit RedisServer(std::vector<std::string> extra = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  /// Writes `text` to <dir>/server.conf and passes that file first on the
  /// command line (redis-sentinel needs a config file it can rewrite).
  bool set_config(const std::string& text);
  /// Starts the server and waits until it answers PING (bounded: 10 s a
  /// try; on a fresh port up to 5 tries, since a port found free can be
  /// taken by a test running beside this one).
  bool start();
  /// SIGKILL and reap.
  void kill9();
  /// SIGTERM, wait (bounded), SIGKILL if needed.
  void stop();
  bool restart() {
    kill9();
    return start();
  }
  void pause();   // SIGSTOP
  void resume();  // SIGCONT

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  /// The library's URL: as the ACL user when acl_file() is set.
  std::string url() const {
    return "redis://" + acl_credentials() + "127.0.0.1:" + std::to_string(port_);
  }
  /// The default user's URL, every command allowed: for a test's own
  /// set-up and inspection (FLUSHALL, DEBUG, CLIENT KILL ...), never for
  /// the library calls under test.
  std::string admin_url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

 private:
  bool start_once();

  std::vector<std::string> extra_;
  std::string config_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// One command over a fresh blocking socket to 127.0.0.1:port (2 s bound);
/// the raw RESP reply ("" on failure). For set-up steps whose replies do
/// not fit a Connection's fixed arena (CLUSTER INFO, SENTINEL replicas).
std::string raw_command(int port, const std::vector<std::string>& args);

/// How many times the server at `port` ran `command` (lower case), from
/// INFO commandstats: 0 if never (or the server did not answer).
uint32_t command_calls(int port, const std::string& command);

/// Runs a program (argv[0] looked up in PATH) with stdout/stderr to
/// `log`, waiting at most `timeout_ms`; returns its exit status or -1.
int run_program(const std::vector<std::string>& argv, const std::string& log, int timeout_ms);

/// A TCP port on 127.0.0.1 that was free a moment ago (never 6379).
int free_port();
/// A port below the ephemeral range that was free a moment ago, with its
/// cluster bus port (+10000) free too.
int free_cluster_port();

/// The last `n` bytes of a text file (for failure messages).
std::string file_tail(const std::string& path, size_t n);

/// How much to stretch timing bounds (EDGELOCK_TEST_SLOWDOWN, e.g. 10 under
/// qemu); 1 by default.
int slowdown();

}  // namespace test
}  // namespace edgelock
