#pragma once
// The fixture of the lock timing-edge tests (lock_edges, fair_edges,
// lease_edges): per test, the suite's redis-server, flushed; conn_ reaches
// it through a test::DelayProxy (delay 0 until a test sets one), other_ and
// admin_ directly.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "delay_proxy.h"
#include "edgelock/edgelock.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"

namespace edgelock {
namespace edges {

constexpr const char* kKey = "edge";

inline Nanos slow(Nanos t) { return t * test::slowdown(); }
inline int64_t slow_ms(int64_t ms) { return ms * test::slowdown(); }
inline TimePoint now() { return default_clock().now(); }
inline void sleep_for(Nanos t) { std::this_thread::sleep_for(std::chrono::nanoseconds(t)); }

// Every fair script cached: a request lost in the proxy must be one that
// runs, not an EVALSHA answered with NOSCRIPT.
inline void load_fair_scripts(Connection& admin) {
  for (const Script* sc :
       {&detail::kFairAcquireScript, &detail::kFairReleaseScript, &detail::kFairLeaveScript,
        &detail::kFairWakeScript, &detail::kExtendScript, &detail::kOwnedScript}) {
    ASSERT_EQ(test::run(admin, {"SCRIPT", "LOAD", std::string(sc->body, sc->len)}), sc->sha1);
  }
}

class ProxiedEdges : public test::SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    proxy_.reset(new test::DelayProxy(server_->port(), Nanos::zero()));
    ASSERT_TRUE(proxy_->start());
    ASSERT_TRUE(test::open(other_, server_->url()));
    ASSERT_TRUE(test::open(admin_, server_->url()));
    ASSERT_EQ(test::run(admin_, {"FLUSHALL"}), "OK");
  }

  // conn_ through the proxy with `timeout` per command.
  bool open_proxied(Nanos timeout) {
    ConnectionOptions o;
    o.connect_timeout = slow(Millis(2000));
    o.command_timeout = timeout;
    o.reconnect_min = Millis(1);
    o.reconnect_max = Millis(10);
    return conn_.init(proxy_->url().c_str(), o).ok();
  }

  // A grant, extend and release at no delay: connects and loads the scripts, so
  // a later delayed request costs exactly one round trip. `lock` is on conn_;
  // attempts() counts from here.
  template <class L>
  void warm(L& lock) {
    ASSERT_TRUE(lock.try_acquire().ok()) << lock.last_error();
    ASSERT_TRUE(lock.renew().ok()) << lock.last_error();
    ASSERT_TRUE(lock.release().ok()) << lock.last_error();
    warm_attempts_ = conn_.metrics().attempts;
  }
  // conn_'s acquire attempts since warm().
  uint32_t attempts() const { return conn_.metrics().attempts - warm_attempts_; }

  std::string exists(const std::string& key) { return test::run(admin_, {"EXISTS", key}); }

  std::unique_ptr<test::DelayProxy> proxy_;
  Connection conn_, other_, admin_;
  uint32_t warm_attempts_ = 0;
};

}  // namespace edges
}  // namespace edgelock
