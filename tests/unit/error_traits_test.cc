// The error table (status.cc): every code has a name and properties, and
// the table reproduces the classifiers it replaces.
#include <gtest/gtest.h>

#include <cstring>

#include "edgelock/status.h"

namespace edgelock {
namespace {

constexpr int kCodes = static_cast<int>(ErrorCode::kInProgress) + 1;

ErrorCode code(int i) { return static_cast<ErrorCode>(i); }

TEST(ErrorTraits, EveryCodeHasAName) {
  for (int i = 0; i < kCodes; ++i) {
    EXPECT_STRNE(to_string(code(i)), "unknown error") << i;
    for (int j = 0; j < i; ++j) EXPECT_STRNE(to_string(code(i)), to_string(code(j))) << i;
  }
  EXPECT_STREQ(to_string(code(kCodes)), "unknown error");
}

TEST(ErrorTraits, OkHasNoProperty) {
  const ErrorTraits t = traits(ErrorCode::kOk);
  EXPECT_FALSE(t.retryable || t.not_sent || t.outcome_unknown || t.server_rejected ||
               t.connection_failed || t.may_have_run);
}

TEST(ErrorTraits, InProgressIsNoOutcome) {
  const ErrorTraits t = traits(ErrorCode::kInProgress);
  EXPECT_FALSE(t.retryable || t.not_sent || t.outcome_unknown || t.server_rejected ||
               t.connection_failed || t.may_have_run);
}

TEST(ErrorTraits, PropertiesAreConsistent) {
  // Every error code (kInProgress, the last, is no error).
  for (int i = 1; i < kCodes - 1; ++i) {
    SCOPED_TRACE(to_string(code(i)));
    const ErrorTraits t = traits(code(i));
    EXPECT_FALSE(t.not_sent && t.server_rejected) << "sent or not, never both";
    EXPECT_FALSE(t.outcome_unknown && (t.not_sent || t.server_rejected));
    EXPECT_EQ(t.may_have_run, !t.not_sent && !t.server_rejected);
    if (t.outcome_unknown) {
      EXPECT_TRUE(t.may_have_run);
    }
  }
}

// What the primitives rely on: the codes an acquire loop retries, and the
// codes after which a request may have run (keep the token, claim less).
TEST(ErrorTraits, RetryAndMayHaveRunAsThePrimitivesNeed) {
  const ErrorCode retry[] = {ErrorCode::kBusy,
                             ErrorCode::kExpired,
                             ErrorCode::kIo,
                             ErrorCode::kConnectionClosed,
                             ErrorCode::kConnectFailed,
                             ErrorCode::kNotConnected,
                             ErrorCode::kTimeout,
                             ErrorCode::kLoading,
                             ErrorCode::kServerBusy,
                             ErrorCode::kConnectionBusy};
  int n = 0;
  for (int i = 0; i < kCodes; ++i) n += traits(code(i)).retryable ? 1 : 0;
  EXPECT_EQ(n, 10);
  for (ErrorCode c : retry) EXPECT_TRUE(traits(c).retryable) << to_string(c);
  const ErrorCode ran[] = {
      ErrorCode::kTimeout,       ErrorCode::kIo,      ErrorCode::kConnectionClosed,
      ErrorCode::kProtocol,      ErrorCode::kTls,     ErrorCode::kBufferTooSmall,
      ErrorCode::kIndeterminate, ErrorCode::kNoQuorum};
  for (ErrorCode c : ran) EXPECT_TRUE(traits(c).may_have_run) << to_string(c);
  const ErrorCode did_not[] = {ErrorCode::kOk,
                               ErrorCode::kServerError,
                               ErrorCode::kReadOnly,
                               ErrorCode::kOutOfMemory,
                               ErrorCode::kServerBusy,
                               ErrorCode::kLoading,
                               ErrorCode::kNoAuth,
                               ErrorCode::kAuthFailed,
                               ErrorCode::kNotConnected,
                               ErrorCode::kConnectFailed,
                               ErrorCode::kInvalidArgument,
                               ErrorCode::kMoved,
                               ErrorCode::kAsk,
                               ErrorCode::kTryAgain,
                               ErrorCode::kNoScript,
                               ErrorCode::kConnectionBusy};
  for (ErrorCode c : did_not) EXPECT_FALSE(traits(c).may_have_run) << to_string(c);
}

TEST(ErrorTraits, RouterClassesAsBefore) {
  // Cluster: a lost node; Sentinel: its outcome is unknown after sending.
  const ErrorCode lost[] = {ErrorCode::kConnectFailed, ErrorCode::kNotConnected, ErrorCode::kIo,
                            ErrorCode::kConnectionClosed, ErrorCode::kTimeout};
  int n = 0;
  for (int i = 0; i < kCodes; ++i) n += traits(code(i)).connection_failed ? 1 : 0;
  EXPECT_EQ(n, 5);
  for (ErrorCode c : lost) EXPECT_TRUE(traits(c).connection_failed) << to_string(c);
  EXPECT_TRUE(traits(ErrorCode::kConnectFailed).not_sent);
  EXPECT_TRUE(traits(ErrorCode::kNotConnected).not_sent);
  EXPECT_FALSE(traits(ErrorCode::kIo).not_sent);
}

TEST(ErrorTraits, ErrorRepliesByClassWord) {
  const struct {
    const char* text;
    ErrorCode code;
  } cases[] = {
      {"WRONGPASS x", ErrorCode::kAuthFailed}, {"ERR invalid password", ErrorCode::kAuthFailed},
      {"NOPERM x", ErrorCode::kAuthFailed},    {"NOAUTH x", ErrorCode::kNoAuth},
      {"READONLY x", ErrorCode::kReadOnly},    {"OOM x", ErrorCode::kOutOfMemory},
      {"BUSY x", ErrorCode::kServerBusy},      {"LOADING x", ErrorCode::kLoading},
      {"MOVED 1 h:1", ErrorCode::kMoved},      {"ASK 1 h:1", ErrorCode::kAsk},
      {"TRYAGAIN x", ErrorCode::kTryAgain},    {"CLUSTERDOWN x", ErrorCode::kTryAgain},
      {"NOSCRIPT x", ErrorCode::kNoScript},    {"ERR x", ErrorCode::kServerError},
      {"MOVEDX", ErrorCode::kServerError},     {"", ErrorCode::kServerError},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(classify_error_reply(c.text, std::strlen(c.text)), c.code) << c.text;
  }
}

}  // namespace
}  // namespace edgelock
