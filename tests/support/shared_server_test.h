#pragma once
// Fixtures for real-server tests: one redis-server per test suite, and
// (SharedServerTest) per test three fresh connections to a flushed server.

#include <gtest/gtest.h>

#include "edgelock/connection.h"
#include "redis_server.h"
#include "test_util.h"

namespace edgelock {
namespace test {

/// One redis-server per test suite, started before its first test and
/// stopped (by PID) after its last.
class SuiteServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServer();
    ASSERT_TRUE(server_->start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  inline static RedisServer* server_ = nullptr;
};

/// The suite's server plus, per test, three fresh connections to it,
/// flushed: a_ and b_ for the library (the ACL user when one is set),
/// admin_ for the test's own commands.
class SharedServerTest : public SuiteServerTest {
 protected:
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(open(a_, server_->url()));
    ASSERT_TRUE(open(b_, server_->url()));
    ASSERT_TRUE(open(admin_, server_->admin_url()));
    ASSERT_EQ(run(admin_, {"FLUSHALL"}), "OK");
  }

  Connection a_, b_, admin_;
};

}  // namespace test
}  // namespace edgelock
