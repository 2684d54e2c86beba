// resp::Parser: the fixed receive buffer, fed by hand as a transport
// would, and the lifetime of the replies read from it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "resp/parser.h"

namespace edgelock {
namespace {

class RespBuffer : public ::testing::Test {
 protected:
  // Feeds `bytes`; returns false if they do not fit the free space.
  bool feed(const std::string& bytes) {
    size_t avail = 0;
    uint8_t* dst = parser_.space(&avail);
    if (avail < bytes.size()) return false;
    std::memcpy(dst, bytes.data(), bytes.size());
    parser_.commit(bytes.size());
    return true;
  }
  const Reply* next_ok() {
    const Reply* r = nullptr;
    const Status s = parser_.next(&r, &why_);
    EXPECT_TRUE(s.ok()) << why_;
    return r;
  }
  ErrorCode next_error() {
    const Reply* r = nullptr;
    return parser_.next(&r, &why_).code();
  }
  size_t free_space() {
    size_t avail = 0;
    parser_.space(&avail);
    return avail;
  }
  // Every reply in `stream`, as text, fed in pieces cut at `cuts`.
  std::vector<std::string> read_all(const std::string& stream, const std::vector<size_t>& cuts) {
    std::vector<std::string> out;
    size_t at = 0;
    for (size_t i = 0; i <= cuts.size(); ++i) {
      const size_t to = i < cuts.size() ? cuts[i] : stream.size();
      EXPECT_TRUE(feed(stream.substr(at, to - at)));
      at = to;
      for (const Reply* r = next_ok(); r; r = next_ok()) {
        out.push_back(describe(*r));
        parser_.release();  // as each command would
      }
    }
    EXPECT_EQ(parser_.unread(), 0u);
    return out;
  }
  static std::string describe(const Reply& r) {
    switch (r.type) {
      case ReplyType::kInteger: return ":" + std::to_string(r.integer);
      case ReplyType::kNil: return "nil";
      case ReplyType::kArray: {
        std::string s = "[";
        for (size_t i = 0; i < r.count; ++i) s += describe(r.elements[i]) + ",";
        return s + "]";
      }
      default:
        EXPECT_EQ(r.str[r.len], '\0');
        return std::to_string(static_cast<int>(r.type)) + std::string(r.str, r.len);
    }
  }

  resp::Parser parser_;
  const char* why_ = "";
};

TEST_F(RespBuffer, ScalarsNilAndUnread) {
  static const char kInput[] = ":-42\r\n+OK\r\n$3\r\na\0b\r\n$-1\r\n-ERR boom\r\n";
  ASSERT_TRUE(feed(std::string(kInput, sizeof kInput - 1)));
  const Reply* r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->integer, -42);
  EXPECT_EQ(parser_.unread(), sizeof kInput - 1 - 6) << "consumed exactly one frame";
  r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, ReplyType::kStatus);
  EXPECT_STREQ(r->str, "OK");
  r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(std::string(r->str, r->len), std::string("a\0b", 3));
  EXPECT_EQ(next_ok()->type, ReplyType::kNil);
  r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, ReplyType::kError);
  EXPECT_STREQ(r->str, "ERR boom");
  EXPECT_EQ(next_ok(), nullptr) << "nothing left";
  EXPECT_EQ(parser_.unread(), 0u);
}

TEST_F(RespBuffer, NestedArrayAndPartialInput) {
  ASSERT_TRUE(feed("*3\r\n:1\r\n*2\r\n$1\r\nx\r\n"));
  EXPECT_EQ(next_ok(), nullptr) << "incomplete";
  EXPECT_EQ(parser_.unread(), 19u) << "nothing consumed";
  ASSERT_TRUE(feed("$0\r\n\r\n$-1\r\n"));
  const Reply* r = next_ok();
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->count, 3u);
  EXPECT_EQ(r->elements[0].integer, 1);
  ASSERT_EQ(r->elements[1].count, 2u);
  EXPECT_STREQ(r->elements[1].elements[0].str, "x");
  EXPECT_EQ(r->elements[1].elements[1].len, 0u);
  EXPECT_EQ(r->elements[2].type, ReplyType::kNil);
}

TEST_F(RespBuffer, NodeOverflowIsBufferTooSmall) {
  std::string many = "*" + std::to_string(kReplyNodes) + "\r\n";
  for (size_t i = 0; i < kReplyNodes; ++i) many += ":1\r\n";
  ASSERT_TRUE(feed(many));
  EXPECT_EQ(next_error(), ErrorCode::kBufferTooSmall);
}

// The nodes of every reply since release() add up (pipelined replies).
TEST_F(RespBuffer, NodesLastUntilRelease) {
  const std::string eight = "*7\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n";
  ASSERT_TRUE(feed(eight + eight + eight));
  ASSERT_NE(next_ok(), nullptr);
  ASSERT_NE(next_ok(), nullptr);
  EXPECT_EQ(next_error(), ErrorCode::kBufferTooSmall);
  parser_.release();
  ASSERT_NE(next_ok(), nullptr) << "released nodes are reused";
}

TEST_F(RespBuffer, GarbageIsProtocolError) {
  ASSERT_TRUE(feed("!what\r\n"));
  EXPECT_EQ(next_error(), ErrorCode::kProtocol);
  EXPECT_STREQ(why_, "RESP3 type byte");
  parser_.clear();
  ASSERT_TRUE(feed("?"));
  EXPECT_EQ(next_error(), ErrorCode::kProtocol);
  EXPECT_STREQ(why_, "unknown type byte");
}

TEST_F(RespBuffer, OverlongStringsAreBufferTooSmall) {
  ASSERT_TRUE(feed("$" + std::to_string(kMaxReplyStringLen + 1) + "\r\n"));
  EXPECT_EQ(next_error(), ErrorCode::kBufferTooSmall);
  parser_.clear();
  const std::string longest(kMaxReplyStringLen, 's');
  ASSERT_TRUE(feed("$" + std::to_string(longest.size()) + "\r\n" + longest + "\r\n"));
  const Reply* r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->len, kMaxReplyStringLen);
}

// Huge error text keeps its class: a bounded prefix, terminated in place.
TEST_F(RespBuffer, HugeErrorIsTruncatedNotOverflowed) {
  ASSERT_TRUE(feed("-READONLY " + std::string(900, 'x') + "\r\n"));
  const Reply* r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, ReplyType::kError);
  EXPECT_EQ(r->len, kErrorTextSize - 1);
  EXPECT_EQ(std::strlen(r->str), kErrorTextSize - 1);
  EXPECT_EQ(std::string(r->str, 8), "READONLY");
  EXPECT_EQ(parser_.unread(), 0u);
}

TEST_F(RespBuffer, BufferIsFixed) {
  // Much more than the receive capacity cannot be fed: the buffer never grows.
  EXPECT_EQ(free_space(), kRxBufferSize);
  EXPECT_FALSE(feed(std::string(kRxBufferSize + 1, 'x')));
  // After each reply is released its space is reclaimed.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(feed(":7\r\n")) << i;
    const Reply* r = next_ok();
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->integer, 7);
    parser_.release();
  }
  EXPECT_EQ(free_space(), kRxBufferSize);
}

// A reply stays put while it is live: later bytes are appended after it,
// never moved over it, even when that leaves the buffer full.
TEST_F(RespBuffer, LiveRepliesAreNeverMoved) {
  ASSERT_TRUE(feed("$5\r\nfirst\r\n"));
  const Reply* first = next_ok();
  ASSERT_NE(first, nullptr);
  const char* where = first->str;
  const size_t rest = free_space();
  EXPECT_EQ(rest, kRxBufferSize - 11) << "no compaction while a reply is live";
  ASSERT_TRUE(feed("-ERR " + std::string(rest - 5, 'z')));  // no CRLF yet
  EXPECT_EQ(next_ok(), nullptr);
  EXPECT_EQ(free_space(), 0u);
  EXPECT_EQ(first->str, where);
  EXPECT_STREQ(first->str, "first");
  parser_.release();
  EXPECT_EQ(free_space(), 11u) << "released: the partial reply moved to the front";
}

// After release() a partial frame at the end moves to the front, and the
// reply completed there points into the moved bytes.
TEST_F(RespBuffer, CompactionKeepsAPartialFrame) {
  ASSERT_TRUE(feed(":1\r\n$5\r\nab"));
  const Reply* one = next_ok();
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->integer, 1);
  EXPECT_EQ(next_ok(), nullptr);
  EXPECT_EQ(parser_.unread(), 6u);
  parser_.release();
  size_t avail = 0;
  const uint8_t* end = parser_.space(&avail);
  EXPECT_EQ(avail, kRxBufferSize - 6);
  ASSERT_TRUE(feed("cde\r\n+next\r\n"));
  const Reply* r = next_ok();
  ASSERT_NE(r, nullptr);
  EXPECT_STREQ(r->str, "abcde");
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(r->str), end - 2) << "at the buffer's start + 4";
  const Reply* next = next_ok();
  ASSERT_NE(next, nullptr);
  EXPECT_STREQ(next->str, "next");
  EXPECT_STREQ(r->str, "abcde") << "both live";
}

// A stream of replies cut at every byte boundary, and fed one byte at a
// time, reads exactly as when it arrives whole.
TEST_F(RespBuffer, EverySplitReadsTheSame) {
  static const char kStream[] =
      "*3\r\n:1\r\n*2\r\n$3\r\na\0b\r\n$-1\r\n+OK\r\n+OK\r\n-ERR boom\r\n$0\r\n\r\n*0\r\n"
      ":-9223372036854775807\r\n*-1\r\n$10\r\n0123456789\r\n";
  const std::string stream(kStream, sizeof kStream - 1);
  const std::vector<std::string> whole = read_all(stream, {});
  ASSERT_EQ(whole.size(), 8u);
  EXPECT_EQ(whole[0], "[:1,[0" + std::string("a\0b", 3) + ",nil,],4OK,]");
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    parser_.clear();
    EXPECT_EQ(read_all(stream, {cut}), whole) << "cut at " << cut;
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < stream.size(); ++i) every.push_back(i);
  parser_.clear();
  EXPECT_EQ(read_all(stream, every), whole) << "one byte at a time";
}

TEST_F(RespBuffer, ClearDropsEverything) {
  ASSERT_TRUE(feed(":1\r\n:2"));
  ASSERT_NE(next_ok(), nullptr);
  parser_.clear();
  EXPECT_EQ(parser_.unread(), 0u);
  EXPECT_EQ(free_space(), kRxBufferSize);
  EXPECT_EQ(next_ok(), nullptr);
}

}  // namespace
}  // namespace edgelock
