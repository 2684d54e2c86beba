#include "redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace edgelock {
namespace test {

namespace {

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

std::string encode(const std::vector<std::string>& args) {
  std::string out = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return out;
}

// One blocking request/response on a fresh socket, 2 s bound.
std::string raw_exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[4096];
    // Read until the last reply's line ends; good enough for simple replies.
    for (int i = 0; i < 50; ++i) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
      if (reply.size() >= 2 && reply.compare(reply.size() - 2, 2, "\r\n") == 0) break;
    }
  }
  close(fd);
  return reply;
}

}  // namespace

std::string server_binary() {
  const char* bin = std::getenv("EDGELOCK_TEST_SERVER");
  return bin && *bin ? bin : "redis-server";
}

std::string acl_file() {
  const char* path = std::getenv("EDGELOCK_TEST_ACL");
  if (!path || !*path) return "";
  char resolved[PATH_MAX];
  return realpath(path, resolved) ? resolved : path;  // a server's cwd is its --dir
}

std::string acl_credentials() {
  const std::string path = acl_file();
  if (path.empty()) return "";
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::string user, password;
  char line[4096];
  while (password.empty() && std::fgets(line, sizeof line, f)) {
    char* save = nullptr;
    const char* word = strtok_r(line, " \t\r\n", &save);
    if (!word || std::strcmp(word, "user") != 0) continue;
    const char* name = strtok_r(nullptr, " \t\r\n", &save);
    if (!name || std::strcmp(name, "default") == 0) continue;
    user = name;
    while ((word = strtok_r(nullptr, " \t\r\n", &save)) && password.empty()) {
      if (word[0] == '>') password = word + 1;
    }
  }
  std::fclose(f);
  return password.empty() ? "" : user + ":" + password + "@";
}

bool server_available() {
  const std::string bin = server_binary();
  if (bin.find('/') != std::string::npos) return access(bin.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    if (access((dir + "/" + bin).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

void exit_unless_server() {
  if (server_available()) return;
  const char* set = std::getenv("EDGELOCK_TEST_SERVER");
  if (set && *set) {
    std::fprintf(stderr,
                 "SKIP: these tests start a Redis server and EDGELOCK_TEST_SERVER='%s' is "
                 "not an executable (a path, or a name in PATH)\n",
                 set);
  } else {
    std::fprintf(stderr,
                 "SKIP: these tests start a Redis server and 'redis-server' is not in PATH: "
                 "install it (scripts/install-deps) or set EDGELOCK_TEST_SERVER to a "
                 "redis-server or valkey-server\n");
  }
  std::fflush(stderr);
  std::exit(77);
}

std::string cli_binary() {
  const std::string server = server_binary();
  const std::string suffix = "-server";
  if (server.size() < suffix.size() ||
      server.compare(server.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return "";
  }
  return server.substr(0, server.size() - suffix.size()) + "-cli";
}

std::string raw_command(int port, const std::vector<std::string>& args) {
  return raw_exchange(port, encode(args));
}

uint32_t command_calls(int port, const std::string& command) {
  const std::string info = raw_command(port, {"INFO", "commandstats"});
  // raw_command() stops at a line end: a count read from part of the
  // reply could miss the command and pass an "unchanged" check.
  const size_t head = info.find("\r\n");
  const bool whole = !info.empty() && info[0] == '$' && head != std::string::npos &&
                     info.size() == head + 2 + std::strtoul(info.c_str() + 1, nullptr, 10) + 2;
  if (!whole) ADD_FAILURE() << "INFO commandstats from port " << port << " came in part";
  const std::string tag = "cmdstat_" + command + ":calls=";
  const size_t at = info.find(tag);
  return at == std::string::npos
             ? 0
             : static_cast<uint32_t>(std::strtoul(info.c_str() + at + tag.size(), nullptr, 10));
}

int run_program(const std::vector<std::string>& args, const std::string& log, int timeout_ms) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) return -1;
  for (int waited = 0; waited <= timeout_ms; waited += 10) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    sleep_ms(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

bool RedisServer::set_config(const std::string& text) {
  if (dir_.empty()) return false;
  config_ = dir_ + "/server.conf";
  FILE* f = std::fopen(config_.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return std::fclose(f) == 0 && ok;
}

namespace {

bool can_bind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

}  // namespace

int free_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    close(fd);
    if (port > 1024 && port != 6379) return port;
  }
  return 0;
}

int free_cluster_port() {
  // Below the ephemeral range (32768+ on Linux) for both the port and its
  // bus port (+10000): no client socket or kernel-picked server port of a
  // test running beside this one can take either of them.
  static unsigned seed =
      static_cast<unsigned>(getpid()) * 2654435761u ^ static_cast<unsigned>(time(nullptr));
  for (int attempt = 0; attempt < 200; ++attempt) {
    seed = seed * 1103515245u + 12345u;
    const int port = 20000 + static_cast<int>((seed >> 8) % 2700);
    if (can_bind(port) && can_bind(port + 10000)) return port;
  }
  return 0;
}

std::string file_tail(const std::string& path, size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "(no " + path + ")";
  std::string text;
  char buf[512];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, got);
  std::fclose(f);
  return text.size() > n ? text.substr(text.size() - n) : text;
}

int slowdown() {
  const char* s = std::getenv("EDGELOCK_TEST_SLOWDOWN");
  const int v = s ? std::atoi(s) : 1;
  return v > 0 ? v : 1;
}

RedisServer::RedisServer(std::vector<std::string> extra) : extra_(std::move(extra)) {
  char tmpl[] = "/tmp/edgelock-redis-XXXXXX";
  if (mkdtemp(tmpl)) dir_ = tmpl;
}

RedisServer::~RedisServer() {
  stop();
  if (!dir_.empty()) {
    const std::string cmd = "rm -rf '" + dir_ + "'";
    if (std::system(cmd.c_str()) != 0) {
      // Best effort clean-up of a temp dir.
    }
  }
}

bool RedisServer::start() {
  if (port_ != 0) return start_once();
  // A port found free can be taken before the server binds it (tests run
  // side by side): try a few fresh ports before giving up.
  const bool cluster = std::find(extra_.begin(), extra_.end(), "--cluster-enabled") != extra_.end();
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = cluster ? free_cluster_port() : free_port();
    if (port_ != 0 && start_once()) return true;
    std::fprintf(stderr, "%s on port %d did not start (attempt %d): %s\n", server_binary().c_str(),
                 port_, attempt + 1, file_tail(dir_ + "/redis.log", 400).c_str());
  }
  port_ = 0;
  return false;
}

bool RedisServer::start_once() {
  std::vector<std::string> args = {server_binary()};
  if (!config_.empty()) args.push_back(config_);
  const std::vector<std::string> defaults = {"--port",       std::to_string(port_),
                                             "--bind",       "127.0.0.1",
                                             "--save",       "",
                                             "--appendonly", "no",
                                             "--dir",        dir_,
                                             "--daemonize",  "no",
                                             "--loglevel",   "warning",
                                             "--logfile",    dir_ + "/redis.log"};
  args.insert(args.end(), defaults.begin(), defaults.end());
  args.insert(args.end(), extra_.begin(), extra_.end());
  // Sentinels have no data to protect; a test that sets its own password
  // is testing authentication itself.
  const bool own_auth = std::find(extra_.begin(), extra_.end(), "--sentinel") != extra_.end() ||
                        std::find(extra_.begin(), extra_.end(), "--requirepass") != extra_.end();
  if (!acl_file().empty() && !own_auth) {
    args.push_back("--aclfile");
    args.push_back(acl_file());
  }
  pid_ = fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  if (pid_ < 0) return false;
  for (int i = 0; i < 400; ++i) {  // 10 s at most
    const std::string r = raw_exchange(port_, encode({"PING"}));
    if (r.rfind("+PONG", 0) == 0 || r.rfind("-NOAUTH", 0) == 0) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    sleep_ms(25);
  }
  kill9();  // never answered: do not leave it running
  return false;
}

void RedisServer::kill9() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);
  kill(pid_, SIGTERM);
  for (int i = 0; i < 200; ++i) {  // 5 s
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    sleep_ms(25);
  }
  kill9();
}

void RedisServer::pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

}  // namespace test
}  // namespace edgelock
