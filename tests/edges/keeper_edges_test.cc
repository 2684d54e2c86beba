// Timing edges of the lease keeper against a real redis-server: a
// renewal whose start blocks (connecting still blocks, docs/nonblocking.md)
// up to the end of the validity it renews.
#include <gtest/gtest.h>

#include <cstdio>

#include "../support/fake_clock.h"
#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/detail/socket_transport.h"
#include "edgelock/edgelock.h"
#include "transport/transport.h"

namespace edgelock {
namespace {

// The built-in socket transport, time on a FakeClock. Once stalled, the
// idle connection looks closed by the server and the reconnect's open()
// takes until its deadline and times out (a SYN lost to a partition).
class StallingTransport final : public Transport {
 public:
  explicit StallingTransport(FakeClock& clock) : clock_(clock) {}
  void stall() { stalled_ = true; }

  Status open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
              Deadline deadline, Clock& clock, ErrorText& err) override {
    (void)addrs;  // a custom transport gets the endpoint as parsed
    if (!stalled_) {
      ResolvedHost resolved;
      bool looked_up = false;
      const Status r = detail::transport_resolve(ep, &resolved, &looked_up, err);
      if (!r.ok()) return r;
      return inner_.open(ep, resolved, tls, deadline, clock, err);
    }
    inner_.close();
    clock_.advance(deadline.remaining(clock_));
    std::snprintf(err, sizeof(ErrorText), "test: connect timed out");
    return ErrorCode::kTimeout;
  }
  void close() override { inner_.close(); }
  bool is_open() const override { return inner_.is_open(); }
  Result<size_t> write_some(const uint8_t* data, size_t n, ErrorText& err) override {
    return inner_.write_some(data, n, err);
  }
  Result<size_t> read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) override {
    return inner_.read_some(dst, cap, may_wait, err);
  }
  Result<size_t> wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                      ErrorText& err) override {
    for (size_t i = 0; i < n; ++i) {
      if (items[i].transport == this) items[i].transport = &inner_;
    }
    return inner_.wait(items, n, deadline, clock, err);
  }
  short extra_events() const override { return inner_.extra_events(); }
  bool has_pending_input() const override { return inner_.has_pending_input(); }
  bool has_stale_input() const override { return stalled_ || inner_.has_stale_input(); }
  int fd() const override { return inner_.fd(); }

 private:
  FakeClock& clock_;
  detail::SocketTransport inner_;
  bool stalled_ = false;
};

class KeeperEdge : public test::SuiteServerTest {};

// The keeper starts a renewal while the lease is valid; the start
// reconnects and blocks until the validity has run out. step() must
// then say kLost, not kKeeping with nothing left (lease_keeper.h: the loss
// is reported by the end of the validity at the latest).
TEST_F(KeeperEdge, RenewalWhoseStartBlocksPastTheEndIsLost) {
  FakeClock clock;
  StallingTransport transport(clock);
  Connection conn;
  ConnectionOptions o;
  o.clock = &clock;
  o.transport = &transport;
  o.command_timeout = Millis(1000);
  o.connect_timeout = Millis(10000);  // the renewal's deadline bounds the connect
  ASSERT_TRUE(conn.init(server_->url().c_str(), o).ok()) << conn.last_error();
  Lock lock(conn);
  LockOptions lo;
  lo.ttl = Millis(3000);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("keeper-edge"), lo).ok());
  ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
  KeeperOptions ko;
  ko.renew_every = Millis(2500);  // ~0.5 s of validity left then: less than a command timeout
  LeaseKeeper keeper(lock, ko);
  ASSERT_TRUE(keeper.start().ok());
  clock.sleep_for(keeper.next_deadline().remaining(clock));  // the renewal is due
  transport.stall();
  const LeaseState st = keeper.step();
  EXPECT_EQ(lock.remaining(), Nanos::zero()) << "the reconnect did not run to the validity's end";
  EXPECT_EQ(st, LeaseState::kLost);
  EXPECT_EQ(keeper.last_status().code(), ErrorCode::kExpired);
  EXPECT_FALSE(lock.in_progress()) << "the renewal in flight is given up with the loss";
}

}  // namespace
}  // namespace edgelock
