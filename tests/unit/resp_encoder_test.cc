// The RESP command encoder (src/resp/encoder.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/lock_keys.h"
#include "resp/encoder.h"

namespace edgelock {
namespace {

using resp::Command;
using resp::encode_command;
using resp::encoded_length;

std::string encode(std::initializer_list<std::string> parts, size_t cap, Status* status) {
  std::vector<Bytes> args;
  for (const auto& p : parts) args.push_back(Bytes(p.data(), p.size()));
  std::vector<uint8_t> buf(cap, 0xAA);
  ByteBuilder out(buf.data(), cap);
  *status = encode_command(out, Command{args.data(), args.size()});
  return std::string(reinterpret_cast<const char*>(buf.data()), out.size());
}

TEST(Encoder, ByteExactSet) {
  Status s;
  EXPECT_EQ(encode({"SET", "k", "v", "NX", "PX", "30000"}, 128, &s),
            "*6\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n");
  EXPECT_TRUE(s.ok());
}

TEST(Encoder, BinarySafeArguments) {
  Status s;
  const std::string key("a b\r\n\0c\xc3\xa9", 9);
  const std::string got = encode({"GET", key}, 64, &s);
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(got, std::string("*2\r\n$3\r\nGET\r\n$9\r\n") + key + "\r\n");
}

TEST(Encoder, EmptyArgument) {
  Status s;
  EXPECT_EQ(encode({"ECHO", ""}, 64, &s), "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
  EXPECT_TRUE(s.ok());
}

TEST(Encoder, LengthIsExact) {
  const std::string big(1000, 'x');
  const Bytes args[3] = {Bytes::from_cstr("SET"), Bytes(big.data(), big.size()),
                         Bytes::from_cstr("1")};
  const size_t want = encoded_length(Command{args, 3});
  std::vector<uint8_t> buf(want);
  ByteBuilder exact(buf.data(), want);
  EXPECT_TRUE(encode_command(exact, Command{args, 3}).ok());
  EXPECT_EQ(exact.size(), want);
  ByteBuilder short_by_one(buf.data(), want - 1);
  EXPECT_EQ(encode_command(short_by_one, Command{args, 3}).code(), ErrorCode::kBufferTooSmall);
  EXPECT_EQ(short_by_one.size(), 0u) << "nothing may be written on refusal";
}

TEST(Encoder, RefusesNoArguments) {
  uint8_t buf[8];
  ByteBuilder out(buf, sizeof buf);
  EXPECT_EQ(encode_command(out, Command{nullptr, 0}).code(), ErrorCode::kInvalidArgument);
}

// A word with a suffix is written as the key's companion, straight into
// the output: the same bytes companion_key() names, with an exact length.
TEST(Encoder, CompanionWordsAreTheCompanionKeys) {
  for (const char* key : {"foo", "{foo}", "a{b}c", "{}", "site{7}:pump", "{x{y}"}) {
    for (const char* suffix : {":fence", ":wake", ":w:17", "queue"}) {
      uint8_t name[64];
      const Result<size_t> n =
          detail::companion_key(Bytes::from_cstr(key), suffix, name, sizeof name);
      ASSERT_TRUE(n.ok()) << key << suffix;
      const std::string want(reinterpret_cast<char*>(name), n.value());
      const Bytes args[3] = {Bytes::from_cstr("BLPOP"), Bytes::from_cstr(key),
                             Bytes::from_cstr("1")};
      const Bytes suffixes[3] = {Bytes(), Bytes::from_cstr(suffix), Bytes()};
      const Command cmd{args, 3, suffixes};
      const std::string wire = "*3\r\n$5\r\nBLPOP\r\n$" + std::to_string(want.size()) + "\r\n" +
                               want + "\r\n$1\r\n1\r\n";
      EXPECT_EQ(encoded_length(cmd), wire.size()) << key << suffix;
      std::vector<uint8_t> buf(wire.size());
      ByteBuilder exact(buf.data(), buf.size());
      ASSERT_TRUE(encode_command(exact, cmd).ok()) << key << suffix;
      EXPECT_EQ(std::string(reinterpret_cast<char*>(buf.data()), exact.size()), wire);
      ByteBuilder short_by_one(buf.data(), buf.size() - 1);
      EXPECT_EQ(encode_command(short_by_one, cmd).code(), ErrorCode::kBufferTooSmall);
      EXPECT_EQ(short_by_one.size(), 0u);
    }
  }
  uint8_t name[32];
  ASSERT_TRUE(detail::companion_key(Bytes::from_cstr("{X}"), ":fence", name, sizeof name).ok());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(name), 9), "fence:{X}");
}

TEST(ByteBuilder, StickyOverflowAndDecimals) {
  uint8_t buf[8];
  ByteBuilder b(buf, sizeof buf);
  b.append_decimal(-1234567);
  EXPECT_TRUE(b.status().ok());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), b.size()), "-1234567");
  b.append_char('x');
  EXPECT_EQ(b.status().code(), ErrorCode::kBufferTooSmall);
  b.append_char('y');
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(decimal_length(INT64_MIN), 20u);
  EXPECT_EQ(decimal_length(0), 1u);
  EXPECT_EQ(decimal_length(4294967296LL), 10u);
}

}  // namespace
}  // namespace edgelock
