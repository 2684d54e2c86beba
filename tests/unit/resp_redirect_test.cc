// Decoding MOVED/ASK error replies from their whole text (the router
// never reads the truncated human error text).
#include <gtest/gtest.h>

#include <string>

#include "edgelock/detail/redirect.h"
#include "edgelock/limits.h"

namespace edgelock {
namespace {

// The host views the text: keep the text alive while the result is used.
resp::Redirect decode(const std::string& s) { return resp::decode_redirect(s.data(), s.size()); }

std::string host_of(const resp::Redirect& r) {
  return std::string(reinterpret_cast<const char*>(r.host.data), r.host.size);
}

TEST(RespRedirect, MovedAndAsk) {
  const std::string moved = "MOVED 3999 10.0.0.2:6381", ask = "ASK 16383 :7000",
                    v6s = "MOVED 1 ::1:7001";
  const resp::Redirect m = decode(moved);
  ASSERT_TRUE(m.valid);
  EXPECT_EQ(m.slot, 3999);
  EXPECT_EQ(m.port, 6381);
  EXPECT_EQ(host_of(m), "10.0.0.2");
  const resp::Redirect a = decode(ask);
  ASSERT_TRUE(a.valid);
  EXPECT_EQ(a.slot, 16383);
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.host.size, 0u) << "empty host: the node that answered";
  const resp::Redirect v6 = decode(v6s);
  ASSERT_TRUE(v6.valid);
  EXPECT_EQ(host_of(v6), "::1");
}

// A host longer than the 127-byte error text is decoded whole.
TEST(RespRedirect, LongHostIsNotCut) {
  const std::string host(kMaxHostLen, 'h');
  const std::string text = "MOVED 42 " + host + ":6390";
  const resp::Redirect r = decode(text);
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(host_of(r), host);
  EXPECT_EQ(r.port, 6390);
  EXPECT_GT(host.size() + 16, kErrorTextSize);
}

TEST(RespRedirect, MalformedIsNotValid) {
  const char* bad[] = {"MOVED",
                       "MOVED ",
                       "MOVED 3999",
                       "MOVED 3999 ",
                       "MOVED x 1.2.3.4:1",
                       "MOVED 16384 h:1",
                       "MOVED 1 h",
                       "MOVED 1 h:",
                       "MOVED 1 h:0",
                       "MOVED 1 h:65536",
                       "MOVED 1 h:1x",
                       "MOVED 1 h:1 extra",
                       "MOVED -1 h:1"};
  for (const char* b : bad) EXPECT_FALSE(decode(b).valid) << b;
}

// The decoder reads only the reply's bytes (they are not NUL-terminated).
TEST(RespRedirect, StopsAtTheReplyEnd) {
  const std::string s = "MOVED 7 h:6379999";
  const resp::Redirect r = resp::decode_redirect(s.data(), s.size() - 3);
  ASSERT_TRUE(r.valid);
  EXPECT_EQ(r.port, 6379);
}

}  // namespace
}  // namespace edgelock
