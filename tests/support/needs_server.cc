// Linked into every gtest program that starts a real server (the `server`
// column of tests/meson.build): before the first test runs, the program
// exits 77, which Meson reports as SKIP, with the reason when the server
// program is missing, instead of failing each test on a server that never
// starts. Listing tests (--gtest_list_tests) runs no environment.
#include <gtest/gtest.h>

#include "redis_server.h"

namespace {

class NeedsServer : public ::testing::Environment {
 public:
  void SetUp() override { edgelock::test::exit_unless_server(); }
};

// gtest owns the environment; registering during static initialization is
// supported (UnitTest::GetInstance() is a function-local static).
::testing::Environment* const kNeedsServer = ::testing::AddGlobalTestEnvironment(new NeedsServer);

}  // namespace
