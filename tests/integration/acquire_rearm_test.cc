// A same-token acquire (a retry after a lost reply, possibly one given up
// on that runs late) re-arms a lease of ours but never shortens it: each
// primitive's acquire script against a real redis-server.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../support/shared_server_test.h"
#include "../support/test_util.h"
#include "edgelock/edgelock.h"
#include "primitives/fair_scripts.h"
#include "primitives/lock_scripts.h"
#include "primitives/reentrant_scripts.h"
#include "primitives/semaphore_scripts.h"

namespace edgelock {
namespace {

using test::run;

class AcquireRearm : public test::SharedServerTest {
 protected:
  // Loaded first, as FairLock does: its EVAL would not fit the buffer.
  void SetUp() override {
    SharedServerTest::SetUp();
    const Script& s = detail::kFairAcquireScript;
    ASSERT_EQ(run(admin_, {"SCRIPT", "LOAD", std::string(s.body, s.len)}), s.sha1);
  }
  // Runs `s` with `keys` and `args`; the reply's first integer (its only
  // one, or the first element of an array).
  int64_t eval(const Script& s, const std::vector<std::string>& keys,
               const std::vector<std::string>& args) {
    std::vector<Bytes> k, a;
    for (const std::string& x : keys) k.push_back(Bytes::from_cstr(x.c_str()));
    for (const std::string& x : args) a.push_back(Bytes::from_cstr(x.c_str()));
    const Result<const Reply*> r =
        admin_.eval({&s, {k.data(), k.size()}, {a.data(), a.size()}},
                    Deadline::after(admin_.clock(), Millis(2000) * test::slowdown()));
    EXPECT_TRUE(r.ok()) << admin_.last_error();
    if (!r.ok()) return INT64_MIN;
    const Reply* v = r.value();
    if (v->type == ReplyType::kArray) return v->elements[0].integer;
    EXPECT_EQ(v->type, ReplyType::kInteger);
    return v->integer;
  }
  int64_t pttl(const std::string& key) { return std::stoll(run(admin_, {"PTTL", key})); }
};

// A long lease (60 s) re-armed by a short acquire (1 s) keeps its TTL; a
// short one (PEXPIRE 100) re-armed by a 5 s acquire is raised to it.
TEST_F(AcquireRearm, LockNeverShortens) {
  const std::vector<std::string> keys = {"{k}", "{k}:fence", "{k}:wake"};
  ASSERT_EQ(eval(detail::kAcquireScript, keys, {"tok", "60000"}), 1);
  EXPECT_EQ(eval(detail::kAcquireScript, keys, {"tok", "1000"}), 2);
  EXPECT_GT(pttl("{k}"), 50000) << "a same-token acquire shortened the lease";
  ASSERT_EQ(run(admin_, {"PEXPIRE", "{k}", "100"}), "1");
  EXPECT_EQ(eval(detail::kAcquireScript, keys, {"tok", "5000"}), 3);
  EXPECT_GT(pttl("{k}"), 1000) << "not re-armed up to the acquire's TTL";
  ASSERT_EQ(run(admin_, {"SET", "{k}", "tok"}), "OK");  // ours, without TTL
  EXPECT_EQ(eval(detail::kAcquireScript, keys, {"tok", "5000"}), 4);
  EXPECT_GT(pttl("{k}"), 0);
  EXPECT_LE(pttl("{k}"), 5000) << "a key of ours without TTL gets the acquire's";
  EXPECT_LT(eval(detail::kAcquireScript, keys, {"other", "1000"}), 0) << "busy for another token";
}

TEST_F(AcquireRearm, QuorumLockNeverShortens) {
  const std::vector<std::string> keys = {"{q}", "{q}:fence"};
  ASSERT_EQ(eval(detail::kQuorumAcquireScript, keys, {"tok", "60000", "1"}), 1);
  EXPECT_EQ(eval(detail::kQuorumAcquireScript, keys, {"tok", "1000", "1"}), 2);
  EXPECT_GT(pttl("{q}"), 50000) << "a same-token acquire shortened the lease";
  ASSERT_EQ(run(admin_, {"PEXPIRE", "{q}", "100"}), "1");
  EXPECT_EQ(eval(detail::kQuorumAcquireScript, keys, {"tok", "5000", "1"}), 3);
  EXPECT_GT(pttl("{q}"), 1000) << "not re-armed up to the acquire's TTL";
}

TEST_F(AcquireRearm, SemaphorePermitNeverShortens) {
  const std::vector<std::string> keys = {"sem"};
  ASSERT_EQ(eval(detail::kSemAcquireScript, keys, {"p1", "60000", "1"}), 1);
  EXPECT_EQ(eval(detail::kSemAcquireScript, keys, {"p1", "1000", "1"}), 1);
  EXPECT_GT(pttl("sem"), 50000) << "the key no longer covers the permit";
  // The permit's own expiry (its score) against a fresh 1 s permit's.
  ASSERT_EQ(eval(detail::kSemAcquireScript, keys, {"p2", "1000", "2"}), 1);
  const int64_t p1 = std::stoll(run(admin_, {"ZSCORE", "sem", "p1"}));
  const int64_t p2 = std::stoll(run(admin_, {"ZSCORE", "sem", "p2"}));
  EXPECT_GT(p1 - p2, 50000) << "a same-id acquire shortened the permit";
  // A permit extended to 100 ms is raised by a 5 s re-arm.
  ASSERT_EQ(eval(detail::kSemExtendScript, keys, {"p2", "100"}), 100);
  EXPECT_EQ(eval(detail::kSemAcquireScript, keys, {"p2", "5000", "2"}), 1);
  const int64_t p2b = std::stoll(run(admin_, {"ZSCORE", "sem", "p2"}));
  EXPECT_GT(p1 - p2b, 50000);
  EXPECT_GT(p2b - p2, 3000) << "not re-armed up to the acquire's TTL";
}

TEST_F(AcquireRearm, ReentrantNeverShortens) {
  const std::vector<std::string> keys = {"{r}", "{r}:fence"};
  ASSERT_EQ(eval(detail::kReentrantAcquireScript, keys, {"o", "60000", "1", "h", "0"}), 1);
  EXPECT_EQ(eval(detail::kReentrantAcquireScript, keys, {"o", "1000", "2", "h", "1"}), 2);
  EXPECT_GT(pttl("{r}"), 50000) << "re-entry shortened the lease";
  ASSERT_EQ(run(admin_, {"PEXPIRE", "{r}", "100"}), "1");
  EXPECT_EQ(eval(detail::kReentrantAcquireScript, keys, {"o", "5000", "3", "h", "2"}), 3);
  EXPECT_GT(pttl("{r}"), 1000) << "not re-armed up to the acquire's TTL";
}

TEST_F(AcquireRearm, FairLockNeverShortens) {
  const std::vector<std::string> keys = {"{f}", "{f}:fence", "{f}:queue"};
  ASSERT_EQ(eval(detail::kFairAcquireScript, keys, {"tok", "60000", "-1000"}), 1);
  EXPECT_EQ(eval(detail::kFairAcquireScript, keys, {"tok", "1000", "-1000"}), 2);
  EXPECT_GT(pttl("{f}"), 50000) << "a same-token acquire shortened the lease";
  ASSERT_EQ(run(admin_, {"PEXPIRE", "{f}", "100"}), "1");
  EXPECT_EQ(eval(detail::kFairAcquireScript, keys, {"tok", "5000", "-1000"}), 3);
  EXPECT_GT(pttl("{f}"), 1000) << "not re-armed up to the acquire's TTL";
}

}  // namespace
}  // namespace edgelock
