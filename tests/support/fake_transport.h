#pragma once
// A scripted, in-process byte stream for unit tests: plugged into a
// Connection with ConnectionOptions::transport, it plays the server's side
// without sockets and with time on a FakeClock. The test scripts, in the
// order the connection writes its requests, what comes back for each: a
// reply (whole or in chunks, each after a delay), nothing (a lost reply),
// or a reset. Every request is recorded as its words for assertions.
//
//   FakeClock clock;
//   test::FakeTransport server(clock);
//   Connection conn;
//   test::setup_fake(conn, server, clock);
//   server.reply(test::resp_int(7), Millis(3));   // the next request's answer
//
// Test code only (heap, std containers): never linked into the library.

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "edgelock/connection.h"
#include "edgelock/detail/transport.h"
#include "fake_clock.h"

namespace edgelock {
namespace test {

// RESP2 replies to script.
std::string resp_int(int64_t v);
std::string resp_ints(std::initializer_list<int64_t> values);
std::string resp_status(const std::string& text);
std::string resp_error(const std::string& text);
std::string resp_bulk(const std::string& bytes);
std::string resp_nil();

class FakeTransport final : public Transport {
 public:
  explicit FakeTransport(FakeClock& clock) : clock_(clock) {}
  FakeTransport(const FakeTransport&) = delete;
  FakeTransport& operator=(const FakeTransport&) = delete;

  // --- The script, consumed one entry per request written whole.
  /// The next request's reply, `delay` after the request was written.
  FakeTransport& reply(const std::string& bytes, Nanos delay = Nanos::zero());
  /// The next request's reply in pieces, each `delay` after the previous.
  FakeTransport& reply_chunks(const std::vector<std::pair<std::string, Nanos>>& chunks);
  /// The next request is written; no reply ever comes.
  FakeTransport& lose_reply();
  /// The next request is written; `delay` later the peer resets the stream.
  FakeTransport& reset_after(Nanos delay = Nanos::zero());
  /// The next open() fails with `code` (opens succeed unless told).
  FakeTransport& refuse_open(ErrorCode code = ErrorCode::kConnectFailed);
  /// Bytes the server sends now, unasked.
  void push_unsolicited(const std::string& bytes);
  /// At most this many bytes per write_some() (0 = no limit).
  void set_write_limit(size_t bytes) { write_limit_ = bytes; }

  // --- What the connection did.
  /// Every request written whole, as its words, oldest first.
  const std::vector<std::vector<std::string>>& requests() const { return requests_; }
  size_t opens() const { return opens_; }
  size_t closes() const { return closes_; }
  /// Requests that found nothing scripted (answered "-ERR unscripted").
  size_t unscripted() const { return unscripted_; }
  /// Script entries not used yet.
  size_t pending() const { return script_.size(); }

  // --- Transport.
  Status open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
              Deadline deadline, Clock& clock, ErrorText& err) override;
  void close() override;
  bool is_open() const override { return open_; }
  Result<size_t> write_some(const uint8_t* data, size_t n, ErrorText& err) override;
  Result<size_t> read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) override;
  Result<size_t> wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                      ErrorText& err) override;
  bool has_stale_input() const override { return due(); }

 private:
  enum class Kind { kReply, kLose, kReset };
  struct Entry {
    Kind kind = Kind::kReply;
    std::vector<std::pair<std::string, Nanos>> chunks;  // kReply
    Nanos delay{0};                                     // kReset
  };
  struct Delivery {
    TimePoint at;
    std::string bytes;
    bool reset = false;
  };

  void take_requests();
  void answer(TimePoint now);
  void deliver(TimePoint at, std::string bytes, bool reset);
  bool due() const;
  TimePoint next_at() const;

  FakeClock& clock_;
  std::deque<Entry> script_;
  std::deque<ErrorCode> open_results_;
  std::deque<Delivery> out_;  // to the connection, in order
  std::string in_;            // from the connection, not yet a whole request
  std::vector<std::vector<std::string>> requests_;
  size_t write_limit_ = 0;
  size_t opens_ = 0;
  size_t closes_ = 0;
  size_t unscripted_ = 0;
  bool open_ = false;
};

/// Sets `conn` up over `server` with `clock` (URL redis://10.0.0.1:6379 by
/// default; no lookup). Returns init()'s status.
Status setup_fake(Connection& conn, FakeTransport& server, FakeClock& clock,
                  ConnectionOptions options = {}, const char* url = "redis://10.0.0.1:6379");

}  // namespace test
}  // namespace edgelock
