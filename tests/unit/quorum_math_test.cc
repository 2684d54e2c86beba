// Quorum arithmetic: majority size, validity after drift on a fake clock,
// when a round is decided and what a failed round means.
#include <gtest/gtest.h>

#include "../support/fake_clock.h"
#include "edgelock/limits.h"
#include "quorum/quorum_math.h"

namespace edgelock {
namespace detail {
namespace {

TEST(QuorumMath, MajorityOfN) {
  EXPECT_EQ(quorum_of(1), 1u);
  EXPECT_EQ(quorum_of(2), 2u);
  EXPECT_EQ(quorum_of(3), 2u);
  EXPECT_EQ(quorum_of(4), 3u);
  EXPECT_EQ(quorum_of(5), 3u);
  EXPECT_EQ(quorum_of(7), 4u);
  EXPECT_GE(kMaxQuorumServers, 7u);
  // Any two majorities overlap: the property both exclusion and fencing use.
  for (size_t n = 1; n <= kMaxQuorumServers; ++n) EXPECT_GT(2 * quorum_of(n), n) << n;
}

TEST(QuorumMath, DriftIsFactorTimesTtlPlusTwoMillis) {
  EXPECT_EQ(drift_of(Millis(10000), 0.01), Millis(100) + Millis(2));
  EXPECT_EQ(drift_of(Millis(10000), 0.0), Millis(2));
  EXPECT_EQ(drift_of(Millis(1000), 0.5), Millis(500) + Millis(2));
}

TEST(QuorumMath, ValidityCountsFromBeforeTheFirstSend) {
  FakeClock clock;
  const TimePoint start = clock.now();  // taken before the first request leaves
  const TimePoint end = validity_end(start, Millis(10000), 0.01);
  EXPECT_EQ(end - start, Millis(10000) - Millis(102));
  clock.advance(Millis(30));  // the quorum-th reply is read 30 ms later
  EXPECT_TRUE(still_valid(end, clock.now()));
  EXPECT_EQ(end - clock.now(), Millis(10000) - Millis(30) - Millis(102)) << "TTL - elapsed - drift";
  clock.advance(end - clock.now() - Nanos(1));
  EXPECT_TRUE(still_valid(end, clock.now())) << "1 ns left is still valid";
  clock.advance(Nanos(1));
  EXPECT_FALSE(still_valid(end, clock.now())) << "validity 0 is expired";
  clock.advance(Millis(5));
  EXPECT_FALSE(still_valid(end, clock.now()));
}

TEST(QuorumMath, RoundDecidedByMajorityOrImpossibility) {
  // n = 5, quorum 3.
  EXPECT_FALSE(round_decided(3, 0, 5));
  EXPECT_FALSE(round_decided(3, 2, 3));
  EXPECT_TRUE(round_decided(3, 3, 2)) << "a majority granted: stop waiting";
  EXPECT_FALSE(round_decided(3, 1, 2)) << "two more yeses would still make it";
  EXPECT_TRUE(round_decided(3, 1, 1)) << "three refused: a majority is impossible";
  EXPECT_TRUE(round_decided(3, 0, 0));
}

Tally tally(size_t n, size_t yes, size_t no, size_t failed, size_t unknown) {
  Tally t;
  t.n = n;
  t.yes = yes;
  t.no = no;
  t.failed = failed;
  t.unknown = unknown;
  return t;
}

TEST(QuorumMath, AcquireFailureKinds) {
  EXPECT_EQ(acquire_failure(tally(5, 0, 3, 2, 0)), ErrorCode::kBusy);
  EXPECT_EQ(acquire_failure(tally(5, 2, 3, 0, 0)), ErrorCode::kBusy);
  EXPECT_EQ(acquire_failure(tally(5, 2, 3, 0, 0)), ErrorCode::kBusy);
  EXPECT_EQ(acquire_failure(tally(5, 2, 0, 3, 0)), ErrorCode::kNoQuorum) << "3 of 5 down";
  EXPECT_EQ(acquire_failure(tally(5, 2, 2, 1, 0)), ErrorCode::kNoQuorum);
  EXPECT_EQ(acquire_failure(tally(5, 2, 0, 2, 1)), ErrorCode::kIndeterminate)
      << "an unanswered request could have made the majority";
  EXPECT_EQ(acquire_failure(tally(5, 0, 0, 3, 2)), ErrorCode::kNoQuorum)
      << "even two more grants could not have made three";
  EXPECT_EQ(acquire_failure(tally(3, 1, 2, 0, 0)), ErrorCode::kBusy);
  EXPECT_EQ(acquire_failure(tally(3, 1, 1, 1, 0)), ErrorCode::kNoQuorum);
  EXPECT_EQ(acquire_failure(tally(1, 0, 1, 0, 0)), ErrorCode::kBusy);
}

TEST(QuorumMath, KeepFailureKinds) {
  EXPECT_EQ(keep_failure(tally(5, 2, 3, 0, 0), 2), ErrorCode::kNotOwner);
  EXPECT_EQ(keep_failure(tally(5, 2, 0, 3, 0), 5), ErrorCode::kNoQuorum);
  EXPECT_EQ(keep_failure(tally(5, 2, 0, 0, 1), 3), ErrorCode::kIndeterminate);
  EXPECT_EQ(keep_failure(tally(3, 1, 1, 0, 1), 2), ErrorCode::kIndeterminate);
  EXPECT_EQ(keep_failure(tally(5, 1, 0, 3, 1), 5), ErrorCode::kNoQuorum);
  EXPECT_EQ(keep_failure(tally(3, 1, 1, 0, 1), 1), ErrorCode::kNotOwner);
}

// The waiter's bound: when enough holders expire for a majority to be free.
TEST(QuorumMath, MajorityFreeIsTheNeededShortestTtl) {
  int64_t a[3] = {5000, 1000, 3000};
  EXPECT_EQ(majority_free_ms(a, 3, 2), 3000) << "3 servers, none free: the 2nd shortest";
  int64_t b[2] = {5000, 3000};
  EXPECT_EQ(majority_free_ms(b, 2, 1), 3000) << "one server free: the shortest of the rest";
  int64_t c[1] = {4000};
  EXPECT_EQ(majority_free_ms(c, 1, 2), 0) << "too few TTLs known (no TTL, no answer)";
  EXPECT_EQ(majority_free_ms(c, 1, 0), 0);
  int64_t d[5] = {9, 7, 5, 3, 1};
  EXPECT_EQ(majority_free_ms(d, 5, 3), 5);
}

}  // namespace
}  // namespace detail
}  // namespace edgelock
