// The strict one-pass RESP2 parser at frame level (src/resp/parser.h), and
// reproducers found by fuzz/reply_fuzz.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "edgelock/limits.h"
#include "resp/parser.h"

namespace edgelock {
namespace {

using resp::Parse;

// One parse over a copy of the input (the parser terminates strings in
// place), with small limits: strings up to 64 bytes, 9 nodes (the root and
// 8 more).
struct Frame {
  explicit Frame(const std::string& in, size_t max_string = 64, size_t nodes = 9)
      : bytes(in.begin(), in.end()), pool_nodes(nodes) {
    pool.nodes = pool_nodes.data();
    pool.capacity = nodes;
    result = resp::parse_frame(bytes.data(), bytes.size(), max_string, pool, &root, &frame, &why);
  }
  std::vector<uint8_t> bytes;
  std::vector<Reply> pool_nodes;
  resp::NodePool pool;
  Parse result = Parse::kInvalid;
  const Reply* root = nullptr;
  size_t frame = 0;
  const char* why = nullptr;
};

Parse check(const std::string& s) { return Frame(s).result; }

TEST(RespParser, CompleteValuesAndFrameLength) {
  const std::string ok[] = {":0\r\n",
                            ":-1\r\n",
                            "+OK\r\n",
                            "-ERR x\r\n",
                            "$0\r\n\r\n",
                            "$-1\r\n",
                            "*-1\r\n",
                            "*0\r\n",
                            std::string("$3\r\na\0b\r\n", 9),
                            "*2\r\n:1\r\n*1\r\n$1\r\nx\r\n",
                            ":9223372036854775807\r\n",
                            ":-9223372036854775807\r\n"};
  for (const std::string& in : ok) {
    const Frame f(in + ":7\r\n");
    EXPECT_EQ(f.result, Parse::kComplete) << in;
    EXPECT_EQ(f.frame, in.size()) << in << ": the frame ends before the next reply";
  }
}

TEST(RespParser, ValuesAndTypes) {
  static const char kInput[] = "*6\r\n:-42\r\n+OK\r\n$3\r\na\0b\r\n$-1\r\n-ERR boom\r\n*0\r\n";
  const Frame f(std::string(kInput, sizeof kInput - 1));
  ASSERT_EQ(f.result, Parse::kComplete) << f.why;
  const Reply& a = *f.root;
  ASSERT_EQ(a.type, ReplyType::kArray);
  ASSERT_EQ(a.count, 6u);
  EXPECT_EQ(a.elements[0].type, ReplyType::kInteger);
  EXPECT_EQ(a.elements[0].integer, -42);
  EXPECT_EQ(a.elements[1].type, ReplyType::kStatus);
  EXPECT_STREQ(a.elements[1].str, "OK");
  EXPECT_EQ(a.elements[2].type, ReplyType::kString);
  EXPECT_EQ(std::string(a.elements[2].str, a.elements[2].len), std::string("a\0b", 3));
  EXPECT_EQ(a.elements[3].type, ReplyType::kNil);
  EXPECT_EQ(a.elements[3].str, nullptr);
  EXPECT_EQ(a.elements[4].type, ReplyType::kError);
  EXPECT_STREQ(a.elements[4].str, "ERR boom");
  EXPECT_EQ(a.elements[5].type, ReplyType::kArray);
  EXPECT_EQ(a.elements[5].count, 0u);
  EXPECT_EQ(f.pool.used, 7u) << "the root and its six elements";
  EXPECT_EQ(Frame("*-1\r\n").root->type, ReplyType::kNil) << "a nil array is a nil reply";
}

// Strings are not copied: they point into the received bytes, whose CR
// (or, for a long error, the byte after the kept prefix) became a NUL.
TEST(RespParser, StringsAreTerminatedInPlace) {
  const Frame bulk("$5\r\nhello\r\n");
  ASSERT_EQ(bulk.result, Parse::kComplete);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(bulk.root->str), bulk.bytes.data() + 4);
  EXPECT_EQ(bulk.bytes[9], 0) << "the CR after the payload";
  EXPECT_EQ(bulk.bytes[10], '\n');
  const Frame empty("$0\r\n\r\n");
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(empty.root->str), empty.bytes.data() + 4);
  EXPECT_STREQ(empty.root->str, "");
  const Frame status("+PONG\r\n");
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(status.root->str), status.bytes.data() + 1);
  EXPECT_STREQ(status.root->str, "PONG");
  const std::string long_error = "-READONLY " + std::string(900, 'x') + "\r\n";
  const Frame err(long_error, 64);
  ASSERT_EQ(err.result, Parse::kComplete) << "errors are not bound by the string limit";
  EXPECT_EQ(err.root->len, kErrorTextSize - 1);
  EXPECT_EQ(err.root->str[kErrorTextSize - 1], '\0');
  EXPECT_EQ(std::string(err.root->str, 8), "READONLY");
  EXPECT_EQ(err.frame, long_error.size()) << "the whole line is consumed";
}

// Anything short of a whole frame leaves the bytes and the pool as they
// were, so the same frame parses again once the rest has arrived.
TEST(RespParser, EveryPrefixIsIncompleteAndUntouched) {
  const std::string full = "*3\r\n:1\r\n*2\r\n$1\r\nx\r\n$0\r\n\r\n-E\r\n";
  for (size_t i = 0; i < full.size(); ++i) {
    const Frame f(full.substr(0, i));
    EXPECT_EQ(f.result, Parse::kIncomplete) << i;
    EXPECT_EQ(std::string(f.bytes.begin(), f.bytes.end()), full.substr(0, i)) << i;
    EXPECT_EQ(f.pool.used, 0u) << i;
  }
  EXPECT_EQ(check(full), Parse::kComplete);
}

TEST(RespParser, RejectsLooseInput) {
  const char* bad[] = {":abc\r\n",
                       ":\r\n",
                       ":-\r\n",
                       ":+1\r\n",
                       ":1 \r\n",
                       ":1x\r\n",
                       ":9223372036854775808\r\n",
                       ":-9223372036854775808\r\n",
                       ":99999999999999999999\r\n",
                       "$-2\r\n",
                       "$-0\r\n",
                       "$x\r\n",
                       "$3\r\nabcXY",
                       "*-2\r\n",
                       "*a\r\n",
                       "?\r\n",
                       "\r\n",
                       ":1\rX",
                       "+a\nb\r\n",
                       "*2\r\n:1\r\n!\r\n",
                       "$1\r\n12\r\n",
                       "-ERR a\nb\r\n",
                       "+O\rK\r\n"};
  for (const char* s : bad) {
    const Frame f(s);
    EXPECT_EQ(f.result, Parse::kInvalid) << s;
    EXPECT_NE(f.why, nullptr);
    EXPECT_EQ(f.pool.used, 0u) << s;
  }
  EXPECT_EQ(check(std::string("\0", 1)), Parse::kInvalid);
  EXPECT_STREQ(Frame(":1\rX").why, "CR without LF");
  EXPECT_STREQ(Frame(":1\n").why, "LF without CR");
  EXPECT_STREQ(Frame("$3\r\nabcXY").why, "bulk string not terminated by CRLF");
}

// We speak RESP2: every RESP3 type byte is a protocol error, at the top
// and inside an array, without waiting for the rest of the value.
TEST(RespParser, Resp3TypesAreRefused) {
  for (const char t : std::string("_,#!=(%~>|")) {
    const Frame top(std::string(1, t));
    EXPECT_EQ(top.result, Parse::kInvalid) << t;
    EXPECT_STREQ(top.why, "RESP3 type byte") << t;
    const Frame inner(std::string("*2\r\n:1\r\n") + t + "1\r\n:1\r\n");
    EXPECT_EQ(inner.result, Parse::kInvalid) << t;
    EXPECT_EQ(inner.pool.used, 0u) << t;
  }
  EXPECT_STREQ(Frame("%1\r\n:1\r\n:1\r\n").why, "RESP3 type byte");
  EXPECT_STREQ(Frame("?").why, "unknown type byte");
}

// Reproducers from fuzz/reply_fuzz.cc.
TEST(RespParser, FuzzReproducers) {
  const char* bad[] = {"*00\r\n]", ":01\r\n", "$01\r\nx\r\n", "*-01\r\n"};
  for (const char* s : bad) EXPECT_EQ(check(s), Parse::kInvalid) << s;
  EXPECT_EQ(check(":0\r\n"), Parse::kComplete);
}

TEST(RespParser, LimitsAndDepth) {
  EXPECT_EQ(check("$64\r\n"), Parse::kIncomplete);
  EXPECT_EQ(check("$65\r\n"), Parse::kTooLarge) << "refused from the header alone";
  EXPECT_EQ(check("$999999999\r\n"), Parse::kTooLarge);
  // Past 2^32: must not wrap to a small length where size_t is 32 bits.
  EXPECT_EQ(check("$4294967297\r\n"), Parse::kTooLarge);
  EXPECT_EQ(check("*4294967297\r\n"), Parse::kTooLarge);
  EXPECT_EQ(check("$9223372036854775807\r\n"), Parse::kTooLarge);
  EXPECT_EQ(check("*9\r\n"), Parse::kTooLarge);
  EXPECT_EQ(check("*8\r\n"), Parse::kIncomplete);
  EXPECT_EQ(check("*2\r\n*4\r\n*3\r\n"), Parse::kTooLarge) << "nodes count over all levels";
  std::string deep;
  for (int i = 0; i < resp::kMaxReplyDepth; ++i) deep += "*1\r\n";
  EXPECT_EQ(check(deep + ":1\r\n"), Parse::kComplete);
  const Frame too_deep("*1\r\n" + deep + ":1\r\n");
  EXPECT_EQ(too_deep.result, Parse::kInvalid);
  EXPECT_STREQ(too_deep.why, "arrays nested too deep");
}

// Arrays at the depth limit and the node capacity at once, with the real
// capacities: kReplyNodes nodes, kMaxReplyDepth levels.
TEST(RespParser, NestedArraysAtTheLimits) {
  // Depth 6 (six arrays), the innermost holding the nodes that are left.
  const size_t inner = kReplyNodes - 1 - resp::kMaxReplyDepth;
  std::string full;
  for (int i = 1; i < resp::kMaxReplyDepth; ++i) full += "*1\r\n";
  full += "*" + std::to_string(inner + 1) + "\r\n";
  for (size_t i = 0; i < inner; ++i) full += "$1\r\n" + std::to_string(i % 10) + "\r\n";
  full += ":-1\r\n";
  const Frame f(full, kMaxReplyStringLen, kReplyNodes);
  ASSERT_EQ(f.result, Parse::kComplete) << f.why;
  EXPECT_EQ(f.pool.used, kReplyNodes);
  const Reply* r = f.root;
  for (int i = 1; i < resp::kMaxReplyDepth; ++i) r = &r->elements[0];
  ASSERT_EQ(r->count, inner + 1);
  EXPECT_STREQ(r->elements[inner - 1].str, std::to_string((inner - 1) % 10).c_str());
  EXPECT_EQ(r->elements[inner].integer, -1);
  // One more value anywhere is one node too many.
  std::string over = full;
  over.replace(over.rfind('*') + 1, std::to_string(inner + 1).size(), std::to_string(inner + 2));
  over += ":1\r\n";
  EXPECT_EQ(Frame(over, kMaxReplyStringLen, kReplyNodes).result, Parse::kTooLarge);
  // Siblings at several depths, each array's elements contiguous.
  const Frame wide("*3\r\n*2\r\n:1\r\n*1\r\n:2\r\n:3\r\n*1\r\n:4\r\n", 64, 10);
  ASSERT_EQ(wide.result, Parse::kComplete) << wide.why;
  EXPECT_EQ(wide.root->elements[0].elements[1].elements[0].integer, 2);
  EXPECT_EQ(wide.root->elements[1].integer, 3);
  EXPECT_EQ(wide.root->elements[2].elements[0].integer, 4);
}

// Lines that can no longer become valid are refused before their CRLF.
TEST(RespParser, OverlongLinesFailEarly) {
  EXPECT_EQ(check(":" + std::string(21, '1')), Parse::kInvalid);
  EXPECT_EQ(check(":" + std::string(20, '1')), Parse::kIncomplete) << "judged at its CRLF";
  EXPECT_EQ(check("$" + std::string(21, '1')), Parse::kInvalid);
  EXPECT_EQ(check("+" + std::string(64, 'y') + "\r\n"), Parse::kComplete);
  EXPECT_EQ(check("+" + std::string(64, 'y')), Parse::kIncomplete);
  EXPECT_EQ(check("+" + std::string(65, 'y')), Parse::kTooLarge);
  EXPECT_EQ(check("-" + std::string(500, 'y')), Parse::kIncomplete) << "errors keep a prefix";
}

TEST(RespParser, EmptyPoolIsTooLarge) {
  const Frame f(":1\r\n", 64, 0);
  EXPECT_EQ(f.result, Parse::kTooLarge);
}

TEST(RespParser, ParseIntIsStrict) {
  int64_t v = 0;
  auto p = [&](const char* s) {
    return resp::parse_int(reinterpret_cast<const uint8_t*>(s), std::strlen(s), &v);
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

}  // namespace
}  // namespace edgelock
