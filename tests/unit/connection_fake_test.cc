// Connection's state machine over the scripted fake transport: no sockets,
// time on a FakeClock. Every failure must leave the connection usable
// (idle, or closed and reconnectable).
#include <gtest/gtest.h>

#include <string>

#include "../support/fake_clock.h"
#include "../support/fake_transport.h"
#include "edgelock/detail/connection_io.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::FakeTransport;

class FakeConnection : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(test::setup_fake(conn_, server_, clock_).ok()); }

  Result<const Reply*> run(std::initializer_list<const char*> words, Nanos budget = Millis(1000)) {
    Bytes args[8];
    size_t n = 0;
    for (const char* w : words) args[n++] = Bytes::from_cstr(w);
    return conn_.command(Span<const Bytes>(args, n), Deadline::after(clock_, budget));
  }
  // The connection answers a PING on the stream it has now.
  void expect_usable() {
    server_.reply(test::resp_status("PONG"));
    const Result<const Reply*> r = run({"PING"});
    ASSERT_TRUE(r.ok()) << conn_.last_error();
    EXPECT_EQ(std::string(r.value()->str, r.value()->len), "PONG");
    EXPECT_FALSE(detail::io(conn_).busy());
  }

  FakeClock clock_;
  FakeTransport server_{clock_};
  Connection conn_;
};

const Script kScript = make_script("return 1");

TEST_F(FakeConnection, CommandRoundTrip) {
  server_.reply(test::resp_status("PONG"), Millis(3));
  const TimePoint t0 = clock_.now();
  const Result<const Reply*> r = run({"PING"});
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  EXPECT_EQ(r.value()->type, ReplyType::kStatus);
  EXPECT_EQ(clock_.now() - t0, Millis(3));
  ASSERT_EQ(server_.requests().size(), 1u);
  EXPECT_EQ(server_.requests()[0], std::vector<std::string>{"PING"});
  EXPECT_EQ(server_.opens(), 1u);
  EXPECT_EQ(conn_.stats().commands, 1u);
  EXPECT_TRUE(conn_.is_connected());
}

TEST_F(FakeConnection, ChunkedReplyAndPartialWrites) {
  server_.set_write_limit(5);
  server_.reply_chunks({{"*2\r\n:1", Millis(1)}, {"\r\n:5\r\n", Millis(30)}});
  const Result<const Reply*> r = run({"EVALSHA", "x", "0"});
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  ASSERT_EQ(r.value()->type, ReplyType::kArray);
  ASSERT_EQ(r.value()->count, 2u);
  EXPECT_EQ(r.value()->elements[1].integer, 5);
}

TEST_F(FakeConnection, LostReplyTimesOutClosesAndReconnects) {
  server_.lose_reply();
  const TimePoint t0 = clock_.now();
  EXPECT_EQ(run({"PING"}, Millis(300)).status().code(), ErrorCode::kTimeout);
  EXPECT_EQ(clock_.now() - t0, Millis(300)) << "one deadline for the whole command";
  EXPECT_FALSE(conn_.is_connected()) << "its reply may still come: the stream is closed";
  EXPECT_EQ(conn_.stats().io_errors, 1u);
  expect_usable();
  EXPECT_EQ(server_.opens(), 2u);
}

TEST_F(FakeConnection, NoscriptFallsBackToEvalOnce) {
  server_.reply(test::resp_error("NOSCRIPT No matching script.")).reply(test::resp_int(1));
  const Result<const Reply*> r = conn_.eval({&kScript}, Deadline::after(clock_, Millis(1000)));
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(server_.requests()[0][0], "EVALSHA");
  EXPECT_EQ(server_.requests()[1][0], "EVAL");
  EXPECT_EQ(server_.requests()[1][1], "return 1");
}

TEST_F(FakeConnection, NoscriptTwiceIsAnErrorNotALoop) {
  server_.reply(test::resp_error("NOSCRIPT a")).reply(test::resp_error("NOSCRIPT b"));
  const Result<const Reply*> r = conn_.eval({&kScript}, Deadline::after(clock_, Millis(1000)));
  EXPECT_EQ(r.status().code(), ErrorCode::kNoScript);
  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_TRUE(conn_.is_connected()) << "an error reply leaves the stream in step";
  expect_usable();
}

// A NOSCRIPT fallback that does not fit the command buffer leaves the
// connection idle and usable, not stuck with a command in flight.
TEST_F(FakeConnection, NoscriptFallbackTooLargeLeavesTheConnectionIdle) {
  std::string body = "return 'x' -- ";
  body.append(kTxBufferSize, 'p');
  const Script big = make_script(body.c_str());
  server_.reply(test::resp_error("NOSCRIPT No matching script."));
  const Result<const Reply*> r = conn_.eval({&big}, Deadline::after(clock_, Millis(1000)));
  EXPECT_EQ(r.status().code(), ErrorCode::kBufferTooSmall);
  EXPECT_TRUE(conn_.is_connected());
  expect_usable();
  EXPECT_EQ(server_.opens(), 1u) << "same stream: nothing was left half sent";
}

TEST_F(FakeConnection, ErrorRepliesAreClassifiedWhenRead) {
  const struct {
    const char* text;
    ErrorCode code;
  } cases[] = {
      {"MOVED 3999 10.0.0.2:6381", ErrorCode::kMoved},
      {"ASK 3999 10.0.0.2:6381", ErrorCode::kAsk},
      {"TRYAGAIN Multiple keys request during rehashing of slot", ErrorCode::kTryAgain},
      {"CLUSTERDOWN The cluster is down", ErrorCode::kTryAgain},
      {"READONLY You can't write against a read only replica.", ErrorCode::kReadOnly},
      {"LOADING Redis is loading the dataset in memory", ErrorCode::kLoading},
      {"BUSY Redis is busy running a script.", ErrorCode::kServerBusy},
      {"OOM command not allowed", ErrorCode::kOutOfMemory},
      {"NOAUTH Authentication required.", ErrorCode::kNoAuth},
      {"WRONGPASS invalid username-password pair", ErrorCode::kAuthFailed},
      {"ERR unknown command", ErrorCode::kServerError},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    server_.reply(test::resp_error(c.text));
    EXPECT_EQ(run({"GET", "k"}).status().code(), c.code);
    EXPECT_STREQ(conn_.last_error(), c.text);
    EXPECT_TRUE(conn_.is_connected());
  }
  EXPECT_EQ(server_.opens(), 1u);
}

TEST_F(FakeConnection, StaleInputOnAnIdleConnectionReconnectsFirst) {
  expect_usable();
  server_.push_unsolicited(test::resp_int(9));  // e.g. a late reply to someone
  server_.reply(test::resp_int(7));
  const Result<const Reply*> r = run({"INCR", "k"});
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  EXPECT_EQ(r.value()->integer, 7) << "the stale :9 was not taken as ours";
  EXPECT_EQ(server_.opens(), 2u);
}

TEST_F(FakeConnection, ResetAfterTheRequestIsConnectionClosed) {
  server_.reset_after(Millis(10));
  EXPECT_EQ(run({"PING"}).status().code(), ErrorCode::kConnectionClosed);
  EXPECT_FALSE(conn_.is_connected());
  expect_usable();
}

TEST_F(FakeConnection, UnsolicitedSecondReplyIsAProtocolError) {
  server_.reply(test::resp_status("OK") + test::resp_status("EXTRA"));
  EXPECT_EQ(run({"SET", "k", "v"}).status().code(), ErrorCode::kProtocol);
  EXPECT_FALSE(conn_.is_connected());
  expect_usable();
}

TEST_F(FakeConnection, MalformedAndOversizedRepliesCloseTheStream) {
  server_.reply("?what\r\n");
  EXPECT_EQ(run({"GET", "k"}).status().code(), ErrorCode::kProtocol);
  EXPECT_FALSE(conn_.is_connected());
  server_.reply(test::resp_bulk(std::string(kMaxReplyStringLen + 1, 'x')));
  EXPECT_EQ(run({"GET", "k"}).status().code(), ErrorCode::kBufferTooSmall);
  EXPECT_FALSE(conn_.is_connected());
  expect_usable();
}

TEST_F(FakeConnection, CommandTooLargeIsRefusedAndTheStreamKept) {
  expect_usable();
  const std::string big(kTxBufferSize, 'v');
  const Bytes args[3] = {Bytes::from_cstr("SET"), Bytes::from_cstr("k"),
                         Bytes(big.data(), big.size())};
  EXPECT_EQ(conn_.command(args, Deadline::after(clock_, Millis(100))).status().code(),
            ErrorCode::kBufferTooSmall);
  EXPECT_TRUE(conn_.is_connected());
  expect_usable();
  EXPECT_EQ(server_.opens(), 1u);
}

TEST_F(FakeConnection, RejectedReplyClosesTheStream) {
  server_.reply(test::resp_status("OK"));
  ASSERT_TRUE(run({"GET", "k"}).ok());
  EXPECT_EQ(detail::io(conn_).reject_reply("GET wants a string").code(), ErrorCode::kProtocol);
  EXPECT_FALSE(conn_.is_connected());
  expect_usable();
}

TEST_F(FakeConnection, FailedConnectsBackOff) {
  server_.refuse_open().refuse_open();
  EXPECT_EQ(run({"PING"}).status().code(), ErrorCode::kConnectFailed);
  EXPECT_EQ(run({"PING"}).status().code(), ErrorCode::kNotConnected) << "backing off";
  EXPECT_EQ(server_.opens(), 1u);
  clock_.advance(ConnectionOptions().reconnect_min);
  EXPECT_EQ(run({"PING"}).status().code(), ErrorCode::kConnectFailed);
  clock_.advance(ConnectionOptions().reconnect_min);
  EXPECT_EQ(run({"PING"}).status().code(), ErrorCode::kNotConnected) << "the backoff doubled";
  clock_.advance(ConnectionOptions().reconnect_min);
  expect_usable();
  EXPECT_EQ(conn_.stats().connect_failures, 2u);
  EXPECT_EQ(conn_.stats().connects, 1u);
}

TEST_F(FakeConnection, CommandThenEvalIsOneWriteTwoReplies) {
  server_.reply(test::resp_error("ERR timeout is not a float"), Millis(50))
      .reply(test::resp_int(5));
  const Bytes blpop[3] = {Bytes::from_cstr("BLPOP"), Bytes::from_cstr("w"),
                          Bytes::from_cstr("0.05")};
  Status first;
  const Result<const Reply*> r = detail::io(conn_).command_then_eval(
      blpop, {&kScript}, Deadline::after(clock_, Millis(1000)), &first);
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  EXPECT_EQ(first.code(), ErrorCode::kServerError);
  EXPECT_EQ(r.value()->integer, 5);
  ASSERT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(server_.requests()[0][0], "BLPOP");
  EXPECT_EQ(server_.requests()[1][0], "EVALSHA");
  EXPECT_EQ(conn_.stats().commands, 2u);
}

TEST_F(FakeConnection, PipelinedEvalIsReadAfterTheRequestAhead) {
  detail::ConnectionIo io = detail::io(conn_);
  server_.reply(test::resp_int(1), Millis(40)).reply(test::resp_int(0));
  ASSERT_TRUE(io.start_eval({&kScript}, Deadline::after(clock_, Millis(1000))).ok());
  ASSERT_TRUE(io.advance().ok());  // written whole
  ASSERT_TRUE(io.busy());
  ASSERT_TRUE(io.pipeline_eval({&kScript}).ok());
  int64_t got[2] = {-1, -1};
  int n = 0;
  for (int turn = 0; turn < 100 && io.busy(); ++turn) {
    const Result<const Reply*> r = io.advance_pipeline();
    ASSERT_TRUE(r.ok()) << conn_.last_error();
    if (r.value()) {
      got[n++] = r.value()->integer;
      continue;
    }
    TransportWait w{&io.transport(), io.wait_events(), 0};
    ErrorText err;
    ASSERT_TRUE(io.transport().wait(&w, 1, Deadline::after(clock_, Millis(500)), clock_, err).ok());
  }
  EXPECT_EQ(n, 2);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[1], 0);
  EXPECT_EQ(server_.requests()[1][0], "EVAL") << "queued by body: never a NOSCRIPT retry";
  expect_usable();
}

TEST_F(FakeConnection, RefusedCallsChangeNothing) {
  detail::ConnectionIo io = detail::io(conn_);
  server_.reply(test::resp_int(1), Millis(40));
  ASSERT_TRUE(io.start_eval({&kScript}, Deadline::after(clock_, Millis(1000))).ok());
  EXPECT_EQ(io.start_eval({&kScript}, Deadline::after(clock_, Millis(1000))).code(),
            ErrorCode::kConnectionBusy);
  EXPECT_EQ(io.pipeline_eval({&kScript}).code(), ErrorCode::kInvalidArgument)
      << "not written whole yet";
  EXPECT_TRUE(io.busy());
  Connection unset;
  EXPECT_EQ(unset.command({}, Deadline::after(clock_, Millis(10))).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(unset.is_connected());
}

// --- AUTH and SELECT: steps of the connect, before the first request.

class FakeAuthConnection : public FakeConnection {
 protected:
  void SetUp() override {
    ASSERT_TRUE(test::setup_fake(conn_, server_, clock_, {}, "redis://:pw@10.0.0.1:6379/2").ok());
  }
};

// Both go out in one write (one round trip, not two); the request waits
// for both +OK before it is written.
TEST_F(FakeAuthConnection, AuthAndSelectShareOneRoundTrip) {
  server_.reply(test::resp_status("OK"), Millis(5));
  server_.reply(test::resp_status("OK"), Millis(5));
  server_.reply(test::resp_status("PONG"), Millis(5));
  const TimePoint t0 = clock_.now();
  const Result<const Reply*> r = run({"PING"});
  ASSERT_TRUE(r.ok()) << conn_.last_error();
  EXPECT_EQ(clock_.now() - t0, Millis(10)) << "AUTH+SELECT, then PING: two round trips";
  ASSERT_EQ(server_.requests().size(), 3u);
  EXPECT_EQ(server_.requests()[0], (std::vector<std::string>{"AUTH", "pw"}));
  EXPECT_EQ(server_.requests()[1], (std::vector<std::string>{"SELECT", "2"}));
  EXPECT_EQ(server_.requests()[2], std::vector<std::string>{"PING"});
  EXPECT_EQ(conn_.stats().connects, 1u);
}

// A refused AUTH or SELECT keeps its code, and the request that started
// the connect is never written (it would run as another user, or in
// database 0).
TEST_F(FakeAuthConnection, RefusedAuthOrSelectNeverSendsTheRequest) {
  const struct {
    const char* auth;
    const char* select;
    ErrorCode code;
  } cases[] = {
      {"-WRONGPASS invalid username-password pair\r\n", "+OK\r\n", ErrorCode::kAuthFailed},
      {"+OK\r\n", "-ERR DB index is out of range\r\n", ErrorCode::kServerError},
  };
  for (const auto& c : cases) {
    server_.reply(c.auth, Millis(2));
    server_.reply(c.select, Millis(2));
    const size_t before = server_.requests().size();
    detail::ConnectionIo io = detail::io(conn_);
    const Bytes ping[1] = {Bytes::from_cstr("PING")};
    ASSERT_TRUE(io.start_command(ping, Deadline::after(clock_, Millis(1000))).ok());
    EXPECT_TRUE(io.connecting());
    EXPECT_EQ(io.wait_events() & kWantRead, kWantRead) << "AUTH/SELECT written: wait for replies";
    Result<const Reply*> r = static_cast<const Reply*>(nullptr);
    for (int turn = 0; turn < 100 && io.busy() && r.ok(); ++turn) {
      clock_.advance(Millis(1));
      r = io.advance();
    }
    EXPECT_EQ(r.status().code(), c.code) << conn_.last_error();
    EXPECT_FALSE(io.busy());
    EXPECT_FALSE(conn_.is_connected());
    ASSERT_EQ(server_.requests().size(), before + 2) << "the PING was written";
    EXPECT_EQ(server_.requests().back()[0], "SELECT");
    EXPECT_EQ(conn_.stats().connect_failures, static_cast<uint32_t>(&c - cases + 1));
    clock_.advance(Millis(5000));  // past the reconnect backoff
  }
}

}  // namespace
}  // namespace edgelock
