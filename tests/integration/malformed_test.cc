// Malformed, truncated, stalled and reset replies from a scripted fake
// server. Each case asserts the exact error code, that it came back within
// the operation deadline + 50 ms, whether the connection was dropped, that
// nothing was reported acquired/released unless the script really said so,
// and that the next operation reconnects cleanly to a behaving server.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../src/primitives/lock_scripts.h"
#include "../support/fake_server.h"
#include "../support/redis_server.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::close_after;
using test::FakeAction;
using test::FakeServer;
using test::reply;
using test::reply_then;
using test::reset_after;
using test::silent;
using test::slow;

enum class Op { kAcquire, kRelease, kExtend, kOwned, kStatus, kPing, kAuthAcquire, kIdleAcquire };

struct Case {
  const char* name;
  Op op;
  std::vector<FakeAction> script;
  ErrorCode want;
  bool broken;                 // connection dropped right after the call
  const char* error_has = "";  // expected in last_error() (optional)
  size_t commands = 0;         // commands the server must have seen (0 = any)
};

constexpr ErrorCode kOk = ErrorCode::kOk;
constexpr ErrorCode kTimeout = ErrorCode::kTimeout;
constexpr ErrorCode kClosed = ErrorCode::kConnectionClosed;
constexpr ErrorCode kProto = ErrorCode::kProtocol;
constexpr ErrorCode kTooBig = ErrorCode::kBufferTooSmall;
constexpr ErrorCode kServer = ErrorCode::kServerError;

// A well-behaved server's answers, used once a case's script is used up.
std::string behave(const FakeServer::Argv& argv) {
  if (argv.empty()) return "-ERR empty\r\n";
  const std::string& cmd = argv[0];
  if (cmd == "AUTH" || cmd == "SELECT") return "+OK\r\n";
  if (cmd == "PING") return "+PONG\r\n";
  if (cmd == "PTTL") return ":1000\r\n";
  if ((cmd == "EVALSHA" || cmd == "EVAL") && argv.size() > 1) {
    const std::string& s = argv[1];
    auto is = [&](const Script& sc) { return s == sc.sha1 || s == std::string(sc.body, sc.len); };
    if (is(detail::kAcquireScript)) return ":42\r\n";
    if (is(detail::kReleaseScript)) return ":1\r\n";
    if (is(detail::kExtendScript) || is(detail::kOwnedScript)) return ":1000\r\n";
  }
  return "-ERR unknown command\r\n";
}

std::string nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "*1\r\n";
  return s + ":1\r\n";
}

std::string ints(int n) {
  std::string s = "*" + std::to_string(n) + "\r\n";
  for (int i = 0; i < n; ++i) s += ":1\r\n";
  return s;
}

std::string bulk(size_t n) {
  return "$" + std::to_string(n) + "\r\n" + std::string(n, 'x') + "\r\n";
}

const std::string kHugeReadOnly = "-READONLY " + std::string(900, 'x') + "\r\n";
const std::string kHugeError = "-ERR " + std::string(3000, 'x') + "\r\n";
const std::string kNoScript = "-NOSCRIPT No matching script.\r\n";

std::vector<Case> cases() {
  using O = Op;
  return {
      // --- Truncated or stalled replies: the deadline ends them.
      {"never_reply", O::kAcquire, {silent()}, kTimeout, true},
      {"truncated_integer", O::kAcquire, {silent(":1")}, kTimeout, true},
      {"cr_without_lf_at_end", O::kAcquire, {silent(":1\r")}, kTimeout, true},
      {"truncated_bulk", O::kAcquire, {silent("$5\r\nab")}, kTimeout, true},
      {"truncated_bulk_header", O::kAcquire, {silent("$5")}, kTimeout, true},
      {"truncated_array", O::kAcquire, {silent("*2\r\n:1\r\n")}, kTimeout, true},
      {"truncated_status", O::kAcquire, {silent("+O")}, kTimeout, true},
      {"truncated_error", O::kAcquire, {silent("-ERR bo")}, kTimeout, true},
      {"slow_reply_past_deadline",
       O::kAcquire,
       {slow(":1\r\n", 80 * test::slowdown())},
       kTimeout,
       true},
      {"slow_error_past_deadline",
       O::kAcquire,
       {slow("-ERR slow\r\n", 40 * test::slowdown())},
       kTimeout,
       true},
      {"release_never_reply", O::kRelease, {silent()}, kTimeout, true},
      {"extend_slow_past_deadline",
       O::kExtend,
       {slow(":1000\r\n", 60 * test::slowdown())},
       kTimeout,
       true},
      {"status_never_reply", O::kStatus, {silent()}, kTimeout, true},
      {"ping_never_reply", O::kPing, {silent()}, kTimeout, true},
      {"noscript_then_silence", O::kAcquire, {reply(kNoScript), silent()}, kTimeout, true, "", 2},
      {"auth_never_reply", O::kAuthAcquire, {silent()}, kTimeout, true},
      // --- Closed or reset before or during the reply.
      {"close_before_reply", O::kAcquire, {close_after()}, kClosed, true},
      {"close_mid_integer", O::kAcquire, {close_after(":1")}, kClosed, true},
      {"close_mid_bulk", O::kAcquire, {close_after("$5\r\nab")}, kClosed, true},
      {"close_mid_array", O::kAcquire, {close_after("*2\r\n:1\r\n")}, kClosed, true},
      {"reset_before_reply", O::kAcquire, {reset_after()}, kClosed, true},
      {"reset_mid_integer", O::kAcquire, {reset_after(":4")}, kClosed, true},
      {"reset_mid_array", O::kAcquire, {reset_after("*2\r\n:1\r\n")}, kClosed, true},
      {"release_close_before_reply", O::kRelease, {close_after()}, kClosed, true},
      {"release_reset_mid_reply", O::kRelease, {reset_after(":")}, kClosed, true},
      {"noscript_then_close", O::kAcquire, {reply(kNoScript), close_after()}, kClosed, true, "", 2},
      {"auth_close", O::kAuthAcquire, {close_after()}, kClosed, true},
      // --- Not RESP at all.
      {"garbage_type_byte", O::kAcquire, {silent("?1\r\n")}, kProto, true, "type byte"},
      {"bare_crlf", O::kAcquire, {silent("\r\n")}, kProto, true},
      {"inline_text", O::kAcquire, {silent("hello\r\n")}, kProto, true},
      {"nul_byte", O::kAcquire, {silent(std::string("\0", 1))}, kProto, true},
      {"http_response", O::kAcquire, {silent("HTTP/1.1 400 Bad Request\r\n\r\n")}, kProto, true},
      {"resp3_map", O::kAcquire, {silent("%1\r\n:1\r\n:1\r\n")}, kProto, true},
      {"integer_letters", O::kAcquire, {silent(":abc\r\n")}, kProto, true, "invalid integer"},
      {"integer_empty", O::kAcquire, {silent(":\r\n")}, kProto, true},
      {"integer_trailing_junk", O::kAcquire, {silent(":1x\r\n")}, kProto, true},
      {"integer_plus_sign", O::kAcquire, {silent(":+1\r\n")}, kProto, true},
      {"integer_space", O::kAcquire, {silent(": 1\r\n")}, kProto, true},
      {"integer_overflow", O::kAcquire, {silent(":99999999999999999999\r\n")}, kProto, true},
      {"integer_int64_max_plus_1", O::kAcquire, {silent(":9223372036854775808\r\n")}, kProto, true},
      {"integer_below_min", O::kAcquire, {silent(":-9223372036854775809\r\n")}, kProto, true},
      {"integer_just_minus", O::kAcquire, {silent(":-\r\n")}, kProto, true},
      {"cr_without_lf", O::kAcquire, {silent(":1\rX\r\n")}, kProto, true, "CR without LF"},
      {"lf_without_cr", O::kAcquire, {silent(":1\n")}, kProto, true, "LF without CR"},
      {"status_with_bare_cr", O::kAcquire, {silent("+O\rK\r\n")}, kProto, true},
      {"error_with_bare_lf", O::kAcquire, {silent("-ERR a\nb\r\n")}, kProto, true},
      {"bulk_negative_length", O::kAcquire, {silent("$-5\r\n")}, kProto, true, "bulk length"},
      {"bulk_minus_zero", O::kAcquire, {silent("$-0\r\nx\r\n")}, kProto, true},
      {"bulk_letters_length", O::kAcquire, {silent("$abc\r\n")}, kProto, true},
      {"bulk_missing_crlf", O::kAcquire, {silent("$3\r\nabcXY")}, kProto, true, "not terminated"},
      {"bulk_too_long_for_length", O::kAcquire, {silent("$1\r\n12\r\n")}, kProto, true},
      {"array_negative_length", O::kAcquire, {silent("*-2\r\n")}, kProto, true, "array length"},
      {"array_bad_element", O::kAcquire, {silent("*2\r\n:1\r\n?\r\n")}, kProto, true},
      {"nested_too_deep", O::kAcquire, {silent(nested(7))}, kProto, true, "too deep"},
      {"nested_past_hiredis_limit", O::kAcquire, {silent(nested(9))}, kProto, true, "too deep"},
      {"status_in_auth", O::kAuthAcquire, {reply(":1\r\n")}, kProto, true, "AUTH"},
      // --- Well-formed, wrong type or value: fail closed, drop the connection.
      {"acquire_status", O::kAcquire, {reply("+OK\r\n")}, kProto, true, "acquire"},
      {"acquire_bulk_one", O::kAcquire, {reply("$1\r\n1\r\n")}, kProto, true},
      {"acquire_nil", O::kAcquire, {reply("$-1\r\n")}, kProto, true},
      {"acquire_nil_array", O::kAcquire, {reply("*-1\r\n")}, kProto, true},
      {"acquire_empty_array", O::kAcquire, {reply("*0\r\n")}, kProto, true},
      {"acquire_array_of_one", O::kAcquire, {reply("*1\r\n:1\r\n")}, kProto, true},
      {"acquire_nested_ok_depth", O::kAcquire, {reply(nested(6))}, kProto, true, "acquire"},
      {"acquire_array_at_capacity", O::kAcquire, {reply(ints(15))}, kProto, true},
      {"release_two", O::kRelease, {reply(":2\r\n")}, kProto, true, "release"},
      {"release_minus_one", O::kRelease, {reply(":-1\r\n")}, kProto, true},
      {"release_status", O::kRelease, {reply("+OK\r\n")}, kProto, true},
      {"release_bulk_one", O::kRelease, {reply("$1\r\n1\r\n")}, kProto, true},
      {"extend_bulk", O::kExtend, {reply("$4\r\n1000\r\n")}, kProto, true},
      {"extend_negative", O::kExtend, {reply(":-5\r\n")}, kProto, true},
      {"extend_nil_array", O::kExtend, {reply("*-1\r\n")}, kProto, true},
      {"owned_status", O::kOwned, {reply("+OK\r\n")}, kProto, true},
      {"owned_minus_two", O::kOwned, {reply(":-2\r\n")}, kProto, true},
      {"status_nil", O::kStatus, {reply("$-1\r\n")}, kProto, true},
      {"status_below_minus_two", O::kStatus, {reply(":-7\r\n")}, kProto, true},
      // --- Too big for the fixed capacities.
      {"bulk_999999999", O::kAcquire, {silent("$999999999\r\n")}, kTooBig, true},
      {"array_999999999", O::kAcquire, {silent("*999999999\r\n")}, kTooBig, true},
      {"bulk_over_rx_buffer", O::kAcquire, {silent(bulk(2000))}, kTooBig, true},
      {"bulk_over_reply_arena", O::kAcquire, {silent(bulk(600))}, kTooBig, true},
      {"array_over_reply_nodes", O::kAcquire, {silent(ints(20))}, kTooBig, true},
      {"error_over_rx_buffer", O::kAcquire, {silent(kHugeError)}, kTooBig, true},
      {"status_line_over_rx_buffer",
       O::kStatus,
       {silent("+" + std::string(3000, 'y'))},
       kTooBig,
       true},
      // --- Unsolicited replies.
      {"unsolicited_before_ours",
       O::kAcquire,
       {reply(":5\r\n:1\r\n")},
       kProto,
       true,
       "more than one"},
      {"unsolicited_error_before_ours", O::kAcquire, {reply("-ERR x\r\n:1\r\n")}, kProto, true},
      {"unsolicited_after_ours_same_packet", O::kRelease, {reply(":1\r\n:1\r\n")}, kProto, true},
      // --- Error replies: classified; the connection stays usable.
      {"err_generic", O::kAcquire, {reply("-ERR boom\r\n")}, kServer, false, "boom"},
      {"err_empty", O::kAcquire, {reply("-\r\n")}, kServer, false},
      {"err_busy", O::kAcquire, {reply("-BUSY script running\r\n")}, ErrorCode::kServerBusy, false},
      {"err_loading", O::kAcquire, {reply("-LOADING loading\r\n")}, ErrorCode::kLoading, false},
      {"err_readonly", O::kAcquire, {reply("-READONLY replica\r\n")}, ErrorCode::kReadOnly, false},
      {"err_oom", O::kRelease, {reply("-OOM no memory\r\n")}, ErrorCode::kOutOfMemory, false},
      {"err_noauth", O::kAcquire, {reply("-NOAUTH auth\r\n")}, ErrorCode::kNoAuth, false},
      {"err_wrongpass",
       O::kAuthAcquire,
       {reply("-WRONGPASS bad\r\n")},
       ErrorCode::kAuthFailed,
       true},
      {"err_noperm", O::kExtend, {reply("-NOPERM no\r\n")}, ErrorCode::kAuthFailed, false},
      {"err_huge_readonly",
       O::kAcquire,
       {reply(kHugeReadOnly)},
       ErrorCode::kReadOnly,
       false,
       "READONLY"},
      {"err_wrongtype_status", O::kStatus, {reply("-WRONGTYPE x\r\n")}, kServer, false},
      {"noscript_twice",
       O::kAcquire,
       {reply(kNoScript), reply(kNoScript)},
       ErrorCode::kNoScript,
       false,
       "NOSCRIPT",
       2},
      {"err_moved",
       O::kAcquire,
       {reply("-MOVED 12539 10.0.0.2:7001\r\n")},
       ErrorCode::kMoved,
       false},
      {"err_ask", O::kRelease, {reply("-ASK 12539 10.0.0.2:7001\r\n")}, ErrorCode::kAsk, false},
      {"err_tryagain",
       O::kExtend,
       {reply("-TRYAGAIN Multiple keys request\r\n")},
       ErrorCode::kTryAgain,
       false},
      {"err_clusterdown",
       O::kAcquire,
       {reply("-CLUSTERDOWN The cluster is down\r\n")},
       ErrorCode::kTryAgain,
       false},
      {"noscript_then_error",
       O::kRelease,
       {reply(kNoScript), reply("-ERR x\r\n")},
       kServer,
       false,
       "",
       2},
      {"slow_error_in_time", O::kAcquire, {slow("-ERR slowly\r\n", 3)}, kServer, false},
      // --- Controls: the server really said yes, so yes.
      {"ok_acquire", O::kAcquire, {reply(":7\r\n")}, kOk, false},
      {"ok_busy_is_busy", O::kAcquire, {reply(":-500\r\n")}, ErrorCode::kBusy, false},
      {"ok_slow_in_time", O::kAcquire, {slow(":7\r\n", 10)}, kOk, false},
      {"ok_reply_then_close", O::kAcquire, {close_after(":7\r\n")}, kOk, false},
      {"ok_noscript_then_eval",
       O::kAcquire,
       {reply(kNoScript), reply(":7\r\n")},
       kOk,
       false,
       "",
       2},
      {"ok_release_not_owner", O::kRelease, {reply(":0\r\n")}, ErrorCode::kNotOwner, false},
      {"ok_owned_false", O::kOwned, {reply(":-3\r\n")}, kOk, false},
      {"ok_int64_max_fence", O::kAcquire, {reply(":9223372036854775807\r\n")}, kOk, false},
      {"ok_idle_close_reconnects",
       O::kIdleAcquire,
       {close_after("+PONG\r\n"), reply(":7\r\n")},
       kOk,
       false},
      {"ok_idle_reset_reconnects",
       O::kIdleAcquire,
       {reset_after("+PONG\r\n"), reply(":7\r\n")},
       kOk,
       false},
      {"ok_idle_unsolicited_reconnects",
       O::kIdleAcquire,
       {reply_then("+PONG\r\n", 1, ":9\r\n"), reply(":7\r\n")},
       kOk,
       false},
  };
}

struct Outcome {
  Status status;
  Nanos elapsed{0};
};

class Malformed : public ::testing::Test {
 protected:
  static Nanos timeout() { return Millis(150) * test::slowdown(); }

  void open(Connection& c, const FakeServer& s, bool auth) {
    ConnectionOptions o;
    o.connect_timeout = timeout();
    o.command_timeout = timeout();
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(2);
    const std::string url = auth ? "redis://:pw@127.0.0.1:" + std::to_string(s.port()) : s.url();
    ASSERT_TRUE(c.init(url.c_str(), o).ok());
  }

  Outcome run(const Case& c, Connection& conn, Lock& lock) {
    Clock& clock = conn.clock();
    if (c.op == Op::kRelease || c.op == Op::kExtend || c.op == Op::kOwned) {
      EXPECT_TRUE(lock.adopt(Bytes::from_cstr("tok")).ok());
    }
    if (c.op == Op::kIdleAcquire) {
      const Bytes ping = Bytes::from_cstr("PING");
      EXPECT_TRUE(conn.command({&ping, 1}, Deadline::after(clock, timeout())).ok());
      clock.sleep_for(Millis(30));  // let the server's close/reset/extra arrive
    }
    Outcome out;
    const TimePoint t0 = clock.now();
    switch (c.op) {
      case Op::kRelease: out.status = lock.release(); break;
      case Op::kExtend: out.status = lock.extend(Millis(1000)); break;
      case Op::kOwned: out.status = lock.owned().status(); break;
      case Op::kStatus: out.status = lock.status().status(); break;
      case Op::kPing: {
        const Bytes ping = Bytes::from_cstr("PING");
        out.status = conn.command({&ping, 1}, Deadline::after(clock, timeout())).status();
        break;
      }
      default: out.status = lock.try_acquire(); break;
    }
    out.elapsed = clock.now() - t0;
    return out;
  }
};

TEST_F(Malformed, EveryCaseFailsClosedInTimeAndRecovers) {
  const std::vector<Case> all = cases();
  std::vector<std::string> names;
  size_t faulty = 0;
  Nanos slowest{0};
  const char* slowest_name = "";
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    names.push_back(c.name);
    FakeServer server(behave);
    ASSERT_TRUE(server.start());
    server.script(c.script);
    Connection conn;
    open(conn, server, c.op == Op::kAuthAcquire);
    if (c.op != Op::kAuthAcquire) {
      ASSERT_TRUE(conn.connect().ok());
    }
    Lock lock(conn);
    ASSERT_TRUE(lock.init(Bytes::from_cstr("k")).ok());

    const Outcome out = run(c, conn, lock);
    EXPECT_EQ(out.status.code(), c.want)
        << "got " << out.status.to_string() << ": " << conn.last_error();
    EXPECT_LE(out.elapsed, timeout() + Millis(50) * test::slowdown());
    EXPECT_EQ(conn.is_connected(), !c.broken) << conn.last_error();
    EXPECT_NE(std::strstr(conn.last_error(), c.error_has), nullptr) << conn.last_error();
    EXPECT_LT(std::strlen(conn.last_error()), kErrorTextSize);
    EXPECT_EQ(server.pending(), 0u) << "the script was not used up";
    if (c.commands) {
      EXPECT_EQ(server.commands().size(), c.commands + (c.op == Op::kIdleAcquire));
    }
    // Never a grant the server did not make.
    const bool acquire =
        c.op == Op::kAcquire || c.op == Op::kAuthAcquire || c.op == Op::kIdleAcquire;
    if (acquire) {
      EXPECT_EQ(lock.held(), c.want == kOk);
      if (c.want != kOk) {
        EXPECT_EQ(lock.fence(), 0u);
      }
    }
    if (c.op == Op::kIdleAcquire) {
      EXPECT_EQ(lock.fence(), 7u) << "the stale :9 was not taken as ours";
    }
    if (c.want != kOk && c.want != ErrorCode::kBusy && c.want != ErrorCode::kNotOwner) {
      ++faulty;
      if (out.elapsed > slowest) {
        slowest = out.elapsed;
        slowest_name = c.name;
      }
    }

    // Recovery: the same handles work again against a behaving server.
    conn.clock().sleep_for(Millis(5));  // past the reconnect backoff
    if (lock.held()) {
      EXPECT_TRUE(lock.release().ok()) << conn.last_error();
    }
    const int connects = server.connections();
    const Status again = lock.try_acquire();
    EXPECT_TRUE(again.ok()) << again.to_string() << ": " << conn.last_error();
    EXPECT_EQ(lock.fence(), 42u);
    EXPECT_TRUE(conn.is_connected());
    if (c.broken) {
      EXPECT_GE(server.connections(), 2);
    }
    if (!c.broken && c.op != Op::kIdleAcquire && std::string(c.name) != "ok_reply_then_close") {
      EXPECT_EQ(server.connections(), connects) << "a healthy connection was kept";
    }
    EXPECT_TRUE(lock.release().ok());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "case names repeat";
  EXPECT_GE(faulty, 60u);
  std::printf(
      "malformed: %zu cases, %zu faulty (error expected), slowest error return %.1f ms (%s), "
      "deadline %lld ms\n",
      all.size(), faulty, static_cast<double>(slowest.count()) / 1e6, slowest_name,
      static_cast<long long>(test::ms(timeout())));
}

}  // namespace
}  // namespace edgelock
