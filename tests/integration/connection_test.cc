// Connection behaviour against real redis-server: auth, select, scripts,
// reconnects, deadlines.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>
#include <thread>

#include "../../src/primitives/lock_scripts.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::RedisServer;
using test::run;

Nanos since(SystemClock& c, TimePoint t0) { return c.now() - t0; }

TEST(Connection, ScriptShaMatchesServer) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection c;
  ASSERT_TRUE(test::open(c, s.url()));
  const Script* scripts[] = {&detail::kAcquireScript, &detail::kReleaseScript,
                             &detail::kExtendScript, &detail::kOwnedScript};
  for (const Script* sc : scripts) {
    EXPECT_EQ(run(c, {"SCRIPT", "LOAD", std::string(sc->body, sc->len)}), sc->sha1);
  }
}

TEST(Connection, NoScriptRecoveryAfterFlushAndRestart) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection c, admin;
  ASSERT_TRUE(test::open(c, s.url()));
  ASSERT_TRUE(test::open(admin, s.admin_url()));
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("k")).ok());
  ASSERT_TRUE(l.try_acquire().ok());
  ASSERT_TRUE(l.release().ok());
  ASSERT_EQ(run(admin, {"SCRIPT", "FLUSH"}), "OK");
  const uint32_t before = c.stats().commands;
  ASSERT_TRUE(l.try_acquire().ok()) << c.last_error();
  EXPECT_EQ(c.stats().commands - before, 2u) << "EVALSHA, NOSCRIPT, then EVAL";
  ASSERT_TRUE(l.release().ok());
  ASSERT_TRUE(s.restart());
  // First command after the restart finds a dead socket; the next reconnects.
  Status st = l.try_acquire();
  for (int i = 0; i < 5 && !st.ok(); ++i) st = l.acquire(Millis(500));
  ASSERT_TRUE(st.ok()) << st.to_string() << " " << c.last_error();
  EXPECT_GE(c.stats().connects, 2u);
  ASSERT_TRUE(l.release().ok());
}

TEST(Connection, PasswordAuth) {
  RedisServer s({"--requirepass", "s3cret"});
  ASSERT_TRUE(s.start());
  const std::string base = "127.0.0.1:" + std::to_string(s.port());
  Connection good, bad, none;
  ASSERT_TRUE(test::open(good, "redis://:s3cret@" + base));
  ASSERT_TRUE(test::open(bad, "redis://:wrong@" + base));
  ASSERT_TRUE(test::open(none, "redis://" + base));
  EXPECT_EQ(run(good, {"PING"}), "PONG");
  Lock lb(bad), ln(none);
  ASSERT_TRUE(lb.init(Bytes::from_cstr("k")).ok());
  ASSERT_TRUE(ln.init(Bytes::from_cstr("k")).ok());
  EXPECT_EQ(lb.try_acquire().code(), ErrorCode::kAuthFailed);
  EXPECT_NE(std::string(bad.last_error()).find("WRONGPASS"), std::string::npos) << bad.last_error();
  EXPECT_EQ(ln.try_acquire().code(), ErrorCode::kNoAuth);
}

TEST(Connection, AclUserAuthAndPermissions) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection admin;
  ASSERT_TRUE(test::open(admin, s.admin_url()));
  ASSERT_EQ(run(admin, {"ACL", "SETUSER", "gw", "on", ">pw1", "~*", "+@all"}), "OK");
  ASSERT_EQ(run(admin, {"ACL", "SETUSER", "ro", "on", ">pw2", "~*", "+get"}), "OK");
  const std::string base = "127.0.0.1:" + std::to_string(s.port());
  Connection gw, wrong, ro;
  ASSERT_TRUE(test::open(gw, "redis://gw:pw1@" + base + "/2"));
  ASSERT_TRUE(test::open(wrong, "redis://gw:nope@" + base));
  ASSERT_TRUE(test::open(ro, "redis://ro:pw2@" + base));
  Lock l(gw), lw(wrong), lr(ro);
  ASSERT_TRUE(l.init(Bytes::from_cstr("acl")).ok());
  ASSERT_TRUE(lw.init(Bytes::from_cstr("acl")).ok());
  ASSERT_TRUE(lr.init(Bytes::from_cstr("acl")).ok());
  ASSERT_TRUE(l.try_acquire().ok()) << gw.last_error();
  EXPECT_EQ(run(admin, {"EXISTS", "acl"}), "0") << "db 2 was selected, not 0";
  ASSERT_EQ(run(admin, {"SELECT", "2"}), "OK");
  EXPECT_EQ(run(admin, {"EXISTS", "acl"}), "1");
  EXPECT_EQ(lw.try_acquire().code(), ErrorCode::kAuthFailed);
  EXPECT_EQ(lr.try_acquire().code(), ErrorCode::kAuthFailed) << "NOPERM";
  ASSERT_TRUE(l.release().ok());
}

TEST(Connection, RefusedConnectFailsFastAndBacksOff) {
  Connection c;
  ASSERT_TRUE(test::open(c, "redis://127.0.0.1:" + std::to_string(test::free_port())));
  SystemClock clock;
  const TimePoint t0 = clock.now();
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("x")).ok());
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kConnectFailed);
  EXPECT_NE(std::string(c.last_error()).find("refused"), std::string::npos) << c.last_error();
  EXPECT_LT(since(clock, t0), Millis(500) * test::slowdown());
}

TEST(Connection, ReconnectBacksOffAfterFailedConnects) {
  Connection c;
  ConnectionOptions o;
  o.reconnect_min = Millis(300);
  o.reconnect_max = Millis(1000);
  ASSERT_TRUE(c.init(("redis://127.0.0.1:" + std::to_string(test::free_port())).c_str(), o).ok());
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("x")).ok());
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kConnectFailed);
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kNotConnected) << "inside the backoff window";
  EXPECT_EQ(c.stats().connect_failures, 1u);
  SystemClock().sleep_for(Millis(320));
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kConnectFailed) << "window over: tries again";
  EXPECT_EQ(c.stats().connect_failures, 2u);
}

TEST(Connection, NoDelayAndKeepAliveAreOn) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection c;
  ASSERT_TRUE(test::open(c, s.url()));
  ASSERT_TRUE(c.connect().ok());
  int v = 0;
  socklen_t len = sizeof v;
  ASSERT_EQ(getsockopt(detail::io(c).fd(), IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
  EXPECT_NE(v, 0);
  ASSERT_EQ(getsockopt(detail::io(c).fd(), SOL_SOCKET, SO_KEEPALIVE, &v, &len), 0);
  EXPECT_NE(v, 0);
}

TEST(Connection, Ipv6Loopback) {
  RedisServer s({"--bind", "::1 127.0.0.1"});
  if (!s.start()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  Connection c;
  ASSERT_TRUE(test::open(c, "redis://[::1]:" + std::to_string(s.port())));
  EXPECT_EQ(run(c, {"PING"}), "PONG");
}

TEST(Connection, ServerKilledMidOperationGivesIoErrorWithinDeadline) {
  RedisServer s({"--enable-debug-command", "yes"});
  ASSERT_TRUE(s.start());
  Connection c;
  ASSERT_TRUE(test::open(c, s.url()));
  ASSERT_EQ(run(c, {"PING"}), "PONG");
  // DEBUG SLEEP keeps the server busy; kill it while our command waits.
  Connection sleeper;
  ASSERT_TRUE(test::open(sleeper, s.admin_url()));
  const Bytes args[3] = {Bytes::from_cstr("DEBUG"), Bytes::from_cstr("SLEEP"),
                         Bytes::from_cstr("5")};
  SystemClock clock;
  ASSERT_TRUE(detail::io(sleeper).start_command(args, Deadline::after(clock, Millis(1000))).ok());
  (void)detail::io(sleeper).advance();
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("k")).ok());
  pid_t killer = fork();
  if (killer == 0) {
    SystemClock().sleep_for(Millis(150));
    kill(s.pid(), SIGKILL);
    _exit(0);
  }
  const TimePoint t0 = clock.now();
  const Status st = l.try_acquire();
  const Nanos took = since(clock, t0);
  waitpid(killer, nullptr, 0);
  EXPECT_TRUE(st.code() == ErrorCode::kConnectionClosed || st.code() == ErrorCode::kIo)
      << st.to_string() << " " << c.last_error();
  EXPECT_LT(took, Millis(2000) * test::slowdown());
  EXPECT_FALSE(c.is_connected()) << "marked broken";
  s.kill9();
}

TEST(Connection, StalledServerTimesOutAtDeadline) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection c;
  ConnectionOptions o;
  o.command_timeout = Millis(200);
  ASSERT_TRUE(c.init(s.url().c_str(), o).ok());
  ASSERT_TRUE(c.connect().ok());
  s.pause();
  SystemClock clock;
  const TimePoint t0 = clock.now();
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("k")).ok());
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kTimeout);
  const Nanos took = since(clock, t0);
  s.resume();
  EXPECT_GE(took, Millis(200));
  EXPECT_LT(took, Millis(250) + Millis(100) * test::slowdown());
  EXPECT_FALSE(c.is_connected());
  // And the next operation reconnects cleanly.
  EXPECT_TRUE(l.try_acquire().ok()) << c.last_error();
}

TEST(Connection, UnixSocket) {
  char path[] = "/tmp/edgelock-sock-XXXXXX";
  ASSERT_NE(mkdtemp(path), nullptr);
  const std::string sock = std::string(path) + "/r.sock";
  RedisServer s({"--unixsocket", sock});
  ASSERT_TRUE(s.start());
  Connection c;
  ASSERT_TRUE(test::open(c, "unix://" + sock + "?db=1"));
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("u")).ok());
  EXPECT_TRUE(l.try_acquire().ok()) << c.last_error();
  EXPECT_TRUE(l.release().ok());
  s.stop();
  rmdir(path);
}

TEST(Connection, ServerErrorRepliesAreClassified) {
  EXPECT_EQ(classify_error_reply("READONLY You can't write", 24), ErrorCode::kReadOnly);
  EXPECT_EQ(classify_error_reply("OOM command not allowed", 23), ErrorCode::kOutOfMemory);
  EXPECT_EQ(classify_error_reply("BUSY Redis is busy", 18), ErrorCode::kServerBusy);
  EXPECT_EQ(classify_error_reply("BUSY Valkey is busy", 19), ErrorCode::kServerBusy);
  EXPECT_EQ(classify_error_reply("LOADING Redis is loading", 24), ErrorCode::kLoading);
  EXPECT_EQ(classify_error_reply("LOADING Valkey is loading", 25), ErrorCode::kLoading);
  EXPECT_EQ(classify_error_reply("NOAUTH Authentication required.", 31), ErrorCode::kNoAuth);
  EXPECT_EQ(classify_error_reply("ERR unknown command", 19), ErrorCode::kServerError);
}

TEST(Connection, OomAndReadOnlyFromRealServer) {
  RedisServer s;
  ASSERT_TRUE(s.start());
  Connection admin, c;
  ASSERT_TRUE(test::open(admin, s.admin_url()));
  ASSERT_TRUE(test::open(c, s.url()));
  Lock l(c);
  ASSERT_TRUE(l.init(Bytes::from_cstr("m")).ok());
  ASSERT_EQ(run(admin, {"CONFIG", "SET", "maxmemory", "1"}), "OK");
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kOutOfMemory) << c.last_error();
  ASSERT_EQ(run(admin, {"CONFIG", "SET", "maxmemory", "0"}), "OK");
  ASSERT_EQ(run(admin, {"REPLICAOF", "127.0.0.1", std::to_string(test::free_port())}), "OK");
  EXPECT_EQ(l.try_acquire().code(), ErrorCode::kReadOnly) << c.last_error();
  EXPECT_TRUE(c.is_connected()) << "an error reply does not break the connection";
}

// A script running past busy-reply-threshold: every other client gets a
// BUSY error, whose text names the server ("BUSY Redis is busy ...",
// "BUSY Valkey is busy ..."); only its first word counts.
TEST(Connection, BusyFromRealServer) {
  RedisServer s({"--busy-reply-threshold", "20"});
  ASSERT_TRUE(s.start());
  Connection c;
  ASSERT_TRUE(test::open(c, s.url()));
  ASSERT_EQ(run(c, {"PING"}), "PONG");
  // Spins for 300 ms of server time, on a raw socket of its own.
  const char* spin =
      "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] "
      "repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s > 300000 return 1";
  std::thread busy([&] { test::raw_command(s.port(), {"EVAL", spin, "0"}); });
  SystemClock clock;
  const Bytes get[2] = {Bytes::from_cstr("GET"), Bytes::from_cstr("k")};
  ErrorCode code = ErrorCode::kOk;
  const TimePoint limit = clock.now() + Millis(2000) * test::slowdown();
  while (code != ErrorCode::kServerBusy && clock.now() < limit) {
    const Result<const Reply*> r =
        c.command(get, Deadline::after(clock, Millis(1000) * test::slowdown()));
    code = r.ok() ? ErrorCode::kOk : r.status().code();
    clock.sleep_for(Millis(5));
  }
  busy.join();
  EXPECT_EQ(code, ErrorCode::kServerBusy) << c.last_error();
  EXPECT_EQ(std::string(c.last_error()).rfind("BUSY ", 0), 0u) << c.last_error();
  EXPECT_TRUE(c.command(get, Deadline::after(clock, Millis(1000) * test::slowdown())).ok())
      << "the script ended; " << c.last_error();
}

}  // namespace
}  // namespace edgelock
