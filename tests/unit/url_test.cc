#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "edgelock/endpoint.h"

namespace edgelock {
namespace {

struct Good {
  const char* url;
  Scheme scheme;
  const char* host;
  int port;
  const char* user;
  const char* password;
  int db;
};

TEST(Url, ValidTable) {
  const Good cases[] = {
      {"redis://localhost", Scheme::kTcp, "localhost", 6379, "", "", 0},
      {"redis://127.0.0.1:6390", Scheme::kTcp, "127.0.0.1", 6390, "", "", 0},
      {"redis://127.0.0.1:6390/3", Scheme::kTcp, "127.0.0.1", 6390, "", "", 3},
      {"redis://:secret@host:1/0", Scheme::kTcp, "host", 1, "", "secret", 0},
      {"redis://alice:p%40ss@host", Scheme::kTcp, "host", 6379, "alice", "p@ss", 0},
      {"redis://alice:p@ss@host", Scheme::kTcp, "host", 6379, "alice", "p@ss", 0},
      {"redis://[::1]:7000", Scheme::kTcp, "::1", 7000, "", "", 0},
      {"redis://[fe80::1]", Scheme::kTcp, "fe80::1", 6379, "", "", 0},
      {"rediss://gw.example:6380/2", Scheme::kTls, "gw.example", 6380, "", "", 2},
      {"redis://h:65535/", Scheme::kTcp, "h", 65535, "", "", 0},
      {"redis://h/1000000", Scheme::kTcp, "h", 6379, "", "", 1000000},
  };
  for (const Good& c : cases) {
    Endpoint ep;
    const char* why = nullptr;
    ASSERT_TRUE(parse_url(c.url, &ep, &why).ok()) << c.url << ": " << (why ? why : "");
    EXPECT_EQ(ep.scheme, c.scheme) << c.url;
    EXPECT_STREQ(ep.host, c.host) << c.url;
    EXPECT_EQ(ep.port, c.port) << c.url;
    EXPECT_STREQ(ep.user, c.user) << c.url;
    EXPECT_STREQ(ep.password, c.password) << c.url;
    EXPECT_EQ(ep.has_password, c.password[0] != '\0') << c.url;
    EXPECT_EQ(ep.db, c.db) << c.url;
  }
}

TEST(Url, UnixSocket) {
  Endpoint ep;
  ASSERT_TRUE(parse_url("unix:///run/redis/redis.sock?db=5", &ep).ok());
  EXPECT_EQ(ep.scheme, Scheme::kUnix);
  EXPECT_STREQ(ep.path, "/run/redis/redis.sock");
  EXPECT_EQ(ep.db, 5);
}

TEST(Url, InvalidTable) {
  const struct {
    const char* url;
    ErrorCode code;
    const char* why_contains;
  } cases[] = {
      {"http://host", ErrorCode::kInvalidArgument, "scheme"},
      {"redis://", ErrorCode::kInvalidArgument, "missing host"},
      {"redis://host:0", ErrorCode::kInvalidArgument, "port"},
      {"redis://host:65536", ErrorCode::kInvalidArgument, "port"},
      {"redis://host:12ab", ErrorCode::kInvalidArgument, "port"},
      {"redis://host:", ErrorCode::kInvalidArgument, "port"},
      {"redis://::1:6379", ErrorCode::kInvalidArgument, "brackets"},
      {"redis://[::1", ErrorCode::kInvalidArgument, "IPv6"},
      {"redis://[::1]x", ErrorCode::kInvalidArgument, "junk"},
      {"redis://host/x", ErrorCode::kInvalidArgument, "database"},
      {"redis://host/-1", ErrorCode::kInvalidArgument, "database"},
      {"redis://host/1000001", ErrorCode::kInvalidArgument, "database"},
      {"redis://host/1234567890", ErrorCode::kInvalidArgument, "database"},
      {"unix:///s.sock?db=", ErrorCode::kInvalidArgument, "database"},
      {"redis://nopass@host", ErrorCode::kInvalidArgument, "':'"},
      {"redis://u:%zz@host", ErrorCode::kInvalidArgument, "escape"},
      {"redis://u:%4@host", ErrorCode::kInvalidArgument, "escape"},
      {"unix://relative.sock", ErrorCode::kInvalidArgument, "absolute"},
      {"unix:///s.sock?foo=1", ErrorCode::kInvalidArgument, "db"},
      {"", ErrorCode::kInvalidArgument, "scheme"},
      {"redis://127.0.0.1 :6379", ErrorCode::kInvalidArgument, "space"},
      {"redis:// host", ErrorCode::kInvalidArgument, "space"},
      {"redis://ho\tst", ErrorCode::kInvalidArgument, "control"},
      {"rediss://u:p@host :6380/1", ErrorCode::kInvalidArgument, "space"},
  };
  for (const auto& c : cases) {
    Endpoint ep;
    const char* why = nullptr;
    const Status s = parse_url(c.url, &ep, &why);
    EXPECT_EQ(s.code(), c.code) << c.url;
    ASSERT_NE(why, nullptr) << c.url;
    EXPECT_NE(std::strstr(why, c.why_contains), nullptr) << c.url << " -> " << why;
  }
}

TEST(Url, OverCapacityIsAnErrorNotATruncation) {
  const std::string host(kMaxHostLen + 1, 'h');
  Endpoint ep;
  EXPECT_EQ(parse_url(("redis://" + host).c_str(), &ep).code(), ErrorCode::kBufferTooSmall);
  const std::string fits(kMaxHostLen, 'h');
  EXPECT_TRUE(parse_url(("redis://" + fits).c_str(), &ep).ok());
  const std::string pw(kMaxPasswordLen + 1, 'p');
  EXPECT_EQ(parse_url(("redis://:" + pw + "@h").c_str(), &ep).code(), ErrorCode::kBufferTooSmall);
}

TEST(Url, FormatEndpoint) {
  Endpoint ep;
  char buf[64];
  ASSERT_TRUE(parse_url("redis://[::1]:7000", &ep).ok());
  format_endpoint(ep, buf, sizeof buf);
  EXPECT_STREQ(buf, "[::1]:7000");
  ASSERT_TRUE(parse_url("redis://10.0.0.1:6390", &ep).ok());
  format_endpoint(ep, buf, sizeof buf);
  EXPECT_STREQ(buf, "10.0.0.1:6390");
}

}  // namespace
}  // namespace edgelock
