// The hiredis reader building replies into the fixed arena, fed by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "transport/reader.h"

namespace edgelock {
namespace {

class ReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { reader_ = detail::reader_create(&arena_, kRxBufferSize); }
  void TearDown() override { detail::reader_free(reader_); }

  // Feeds `bytes`; returns false if they do not fit the fixed buffer.
  bool feed(const std::string& bytes) {
    size_t avail = 0;
    uint8_t* dst = detail::reader_space(reader_, &avail);
    if (!dst || avail < bytes.size()) return false;
    std::memcpy(dst, bytes.data(), bytes.size());
    detail::reader_commit(reader_, bytes.size());
    return true;
  }
  // Resets the arena only between complete replies, as Connection does per
  // command: a partially parsed reply keeps its nodes across reads.
  Result<const Reply*> next() {
    if (complete_) arena_.reset();
    Result<const Reply*> r = detail::reader_next(reader_, arena_, err_);
    complete_ = r.ok() && r.value();
    return r;
  }
  bool complete_ = true;

  ReplyArena arena_;
  void* reader_ = nullptr;
  char err_[kErrorTextSize] = {};
};

TEST_F(ReaderTest, ScalarsAndNil) {
  static const char kInput[] = ":-42\r\n+OK\r\n$3\r\na\0b\r\n$-1\r\n-ERR boom\r\n";
  ASSERT_TRUE(feed(std::string(kInput, sizeof kInput - 1)));
  Result<const Reply*> r = next();
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(r.value()->type, ReplyType::kInteger);
  EXPECT_EQ(r.value()->integer, -42);
  r = next();
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(r.value()->type, ReplyType::kStatus);
  EXPECT_EQ(std::string(r.value()->str, r.value()->len), "OK");
  r = next();
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(r.value()->type, ReplyType::kString);
  EXPECT_EQ(std::string(r.value()->str, r.value()->len), std::string("a\0b", 3));
  r = next();
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(r.value()->type, ReplyType::kNil);
  r = next();
  ASSERT_TRUE(r.ok() && r.value());
  EXPECT_EQ(r.value()->type, ReplyType::kError);
  EXPECT_EQ(std::string(r.value()->str), "ERR boom");
  r = next();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), nullptr) << "nothing left";
}

TEST_F(ReaderTest, NestedArrayAndPartialInput) {
  ASSERT_TRUE(feed("*3\r\n:1\r\n*2\r\n$1\r\nx\r\n"));
  Result<const Reply*> r = next();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), nullptr) << "incomplete";
  ASSERT_TRUE(feed("$0\r\n\r\n$-1\r\n"));
  r = next();
  ASSERT_TRUE(r.ok() && r.value());
  const Reply& a = *r.value();
  ASSERT_EQ(a.type, ReplyType::kArray);
  ASSERT_EQ(a.count, 3u);
  EXPECT_EQ(a.elements[0].integer, 1);
  ASSERT_EQ(a.elements[1].count, 2u);
  EXPECT_EQ(std::string(a.elements[1].elements[0].str), "x");
  EXPECT_EQ(a.elements[1].elements[1].len, 0u);
  EXPECT_EQ(a.elements[2].type, ReplyType::kNil);
}

TEST_F(ReaderTest, ArenaOverflowIsBufferTooSmall) {
  std::string many = "*" + std::to_string(kReplyNodes + 1) + "\r\n";
  for (size_t i = 0; i <= kReplyNodes; ++i) many += ":1\r\n";
  ASSERT_TRUE(feed(many));
  const Result<const Reply*> r = next();
  EXPECT_EQ(r.status().code(), ErrorCode::kBufferTooSmall);
}

TEST_F(ReaderTest, GarbageIsProtocolError) {
  ASSERT_TRUE(feed("!what\r\n"));
  const Result<const Reply*> r = next();
  EXPECT_EQ(r.status().code(), ErrorCode::kProtocol);
  EXPECT_NE(std::strstr(err_, "protocol error"), nullptr);
}

TEST_F(ReaderTest, BufferIsFixed) {
  // Much more than the receive capacity cannot be fed: the reader never grows.
  std::string huge(kRxBufferSize * 4, 'x');
  EXPECT_FALSE(feed(huge));
  // After consuming replies the space is reclaimed.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(feed(":7\r\n")) << i;
    const Result<const Reply*> r = next();
    ASSERT_TRUE(r.ok() && r.value());
    ASSERT_EQ(r.value()->integer, 7);
  }
}

}  // namespace
}  // namespace edgelock
