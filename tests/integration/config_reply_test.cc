// The receive buffer against the bound check_config.h derives for it: the
// bound's reply (one string at the parser's longest, integers otherwise) is
// exactly kLongestReplyFrame bytes and reads whole with the configured
// rx_buffer_size; one byte more of string data is refused (by the string
// cap) with kBufferTooSmall and the connection stays usable.
#include <gtest/gtest.h>

#include <string>

#include "../support/fake_server.h"
#include "../support/test_util.h"
#include "base/check_config.h"
#include "edgelock/edgelock.h"

namespace edgelock {
namespace {

using test::FakeServer;

// An array of kReplyNodes - 1 elements: integers at their longest (the
// parser refuses INT64_MIN, so 19 digits and a sign: 23 bytes) and one
// bulk string of `data` bytes. `text` gets test::run()'s rendering of it.
std::string longest_reply(size_t data, std::string* text) {
  std::string frame = "*" + std::to_string(kReplyNodes - 1) + "\r\n";
  text->clear();
  for (size_t i = 0; i + 2 < kReplyNodes; ++i) {
    frame += ":-9223372036854775807\r\n";
    *text += "-9223372036854775807 ";
  }
  const std::string s(data, 'x');
  frame += "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
  *text += s;
  return frame;
}

TEST(ConfigCheck, LongestBoundReplyFitsTheReceiveBuffer) {
  std::string text;
  const std::string fits = longest_reply(kMaxReplyStringLen, &text);
  std::string unused;
  const std::string too_long = longest_reply(kMaxReplyStringLen + 1, &unused);
  std::printf("longest reply %zu B (bound %zu B), rx_buffer_size %zu B\n", fits.size(),
              config_check::kLongestReplyFrame, kRxBufferSize);
  ASSERT_EQ(fits.size(), config_check::kLongestReplyFrame) << "the bound must be reachable";
  ASSERT_LE(too_long.size(), kRxBufferSize) << "the next case must be the string cap's refusal";

  FakeServer server([&](const FakeServer::Argv& argv) {
    if (argv.size() > 1 && argv[0] == "ECHO") return argv[1] == "fits" ? fits : too_long;
    return std::string("+PONG\r\n");
  });
  ASSERT_TRUE(server.start());
  Connection c;
  ASSERT_TRUE(test::open(c, server.url()));
  EXPECT_EQ(test::run(c, {"ECHO", "fits"}), text) << c.last_error();

  const Bytes args[2] = {Bytes::from_cstr("ECHO"), Bytes::from_cstr("too long")};
  const Result<const Reply*> r = c.command(args, Deadline::after(c.clock(), Millis(2000)));
  EXPECT_EQ(r.status().code(), ErrorCode::kBufferTooSmall) << c.last_error();
  EXPECT_EQ(test::run(c, {"PING"}), "PONG") << "the connection must stay usable";
  server.stop();
}

}  // namespace
}  // namespace edgelock
