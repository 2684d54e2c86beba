// The strict RESP2 check run before hiredis (src/transport/resp_check.h),
// and reproducers found by fuzz/reply_fuzz.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "edgelock/limits.h"
#include "transport/reader.h"
#include "transport/resp_check.h"

namespace edgelock {
namespace {

using detail::RespCheck;

RespCheck check(const std::string& s, size_t* frame = nullptr, const char** why = nullptr) {
  detail::RespLimits lim;
  lim.max_bulk = 64;
  lim.max_elements = 8;
  size_t f = 0;
  const char* w = "";
  const RespCheck r = detail::resp_check(reinterpret_cast<const uint8_t*>(s.data()), s.size(), lim,
                                         &f, &w);
  if (frame) *frame = f;
  if (why) *why = w;
  return r;
}

TEST(RespCheck, CompleteValuesAndFrameLength) {
  const std::string ok[] = {":0\r\n", ":-1\r\n", "+OK\r\n", "-ERR x\r\n", "$0\r\n\r\n", "$-1\r\n",
                            "*-1\r\n", "*0\r\n", std::string("$3\r\na\0b\r\n", 9),
                            "*2\r\n:1\r\n*1\r\n$1\r\nx\r\n", ":9223372036854775807\r\n",
                            ":-9223372036854775807\r\n"};
  for (const std::string& in : ok) {
    size_t frame = 0;
    EXPECT_EQ(check(in + ":7\r\n", &frame), RespCheck::kComplete) << in;
    EXPECT_EQ(frame, in.size()) << in << ": the frame ends before the next reply";
  }
}

TEST(RespCheck, EveryPrefixIsIncomplete) {
  const std::string full = "*3\r\n:1\r\n*2\r\n$1\r\nx\r\n$0\r\n\r\n-E\r\n";
  for (size_t i = 0; i < full.size(); ++i) {
    EXPECT_EQ(check(full.substr(0, i)), RespCheck::kIncomplete) << i;
  }
  EXPECT_EQ(check(full), RespCheck::kComplete);
}

TEST(RespCheck, RejectsWhatHiredisWouldAccept) {
  const char* bad[] = {":abc\r\n", ":\r\n", ":-\r\n", ":+1\r\n", ":1 \r\n", ":1x\r\n",
                       ":9223372036854775808\r\n", ":-9223372036854775808\r\n",
                       ":99999999999999999999\r\n", "$-2\r\n", "$-0\r\n", "$x\r\n",
                       "$3\r\nabcXY", "*-2\r\n", "*a\r\n", "?\r\n", "\r\n", "_\r\n",
                       ":1\rX", "+a\nb\r\n", "*2\r\n:1\r\n!\r\n"};
  for (const char* s : bad) {
    const char* why = nullptr;
    EXPECT_EQ(check(s, nullptr, &why), RespCheck::kInvalid) << s;
    EXPECT_NE(why, nullptr);
  }
}

// Reproducers from fuzz/reply_fuzz.cc: values the checker passed but
// hiredis refused (each must now be refused up front, and the verdicts of
// both parsers must agree).
TEST(RespCheck, FuzzReproducers) {
  const char* bad[] = {"*00\r\n]", ":01\r\n", "$01\r\nx\r\n", "*-01\r\n"};
  for (const char* s : bad) EXPECT_EQ(check(s), RespCheck::kInvalid) << s;
  EXPECT_EQ(check(":0\r\n"), RespCheck::kComplete);
}

TEST(RespCheck, LimitsAndDepth) {
  EXPECT_EQ(check("$65\r\n"), RespCheck::kTooLarge);
  EXPECT_EQ(check("$999999999\r\n"), RespCheck::kTooLarge);
  EXPECT_EQ(check("*9\r\n"), RespCheck::kTooLarge);
  EXPECT_EQ(check("*2\r\n*4\r\n*3\r\n"), RespCheck::kTooLarge) << "elements count over all levels";
  std::string deep;
  for (int i = 0; i < detail::kMaxReplyDepth; ++i) deep += "*1\r\n";
  EXPECT_EQ(check(deep + ":1\r\n"), RespCheck::kComplete);
  const char* why = "";
  EXPECT_EQ(check("*1\r\n" + deep + ":1\r\n", nullptr, &why), RespCheck::kInvalid);
  EXPECT_STREQ(why, "arrays nested too deep");
}

TEST(RespCheck, ParseIntIsStrict) {
  int64_t v = 0;
  auto p = [&](const char* s) {
    return detail::resp_parse_int(reinterpret_cast<const uint8_t*>(s), std::strlen(s), &v);
  };
  EXPECT_TRUE(p("0"));
  EXPECT_TRUE(p("-9223372036854775807"));
  EXPECT_EQ(v, -9223372036854775807LL);
  EXPECT_TRUE(p("9223372036854775807"));
  EXPECT_EQ(v, 9223372036854775807LL);
  EXPECT_FALSE(p("9223372036854775808"));
  EXPECT_FALSE(p("18446744073709551616"));
  EXPECT_FALSE(p(""));
  EXPECT_FALSE(p("-"));
  EXPECT_FALSE(p("-0"));
  EXPECT_FALSE(p("1e3"));
}

// Huge error text keeps its class: a bounded prefix lands in the arena.
TEST(RespCheck, HugeErrorIsTruncatedNotOverflowed) {
  ReplyArena arena;
  void* r = detail::reader_create(&arena, kRxBufferSize);
  ASSERT_NE(r, nullptr);
  const std::string in = "-READONLY " + std::string(900, 'x') + "\r\n";
  size_t avail = 0;
  uint8_t* dst = detail::reader_space(r, &avail);
  ASSERT_GE(avail, in.size());
  std::memcpy(dst, in.data(), in.size());
  detail::reader_commit(r, in.size());
  char err[kErrorTextSize] = {};
  const Result<const Reply*> rep = detail::reader_next(r, arena, err);
  ASSERT_TRUE(rep.ok() && rep.value()) << err;
  EXPECT_EQ(rep.value()->type, ReplyType::kError);
  EXPECT_EQ(rep.value()->len, kErrorTextSize - 1);
  EXPECT_EQ(std::string(rep.value()->str, 8), "READONLY");
  detail::reader_free(r);
}

}  // namespace
}  // namespace edgelock
