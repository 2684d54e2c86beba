// Cluster key slots (vectors from `redis-cli cluster keyslot`), the
// cluster key check, and the cluster/sentinel URL parsers.
#include <gtest/gtest.h>

#include <string>

#include "edgelock/cluster.h"
#include "edgelock/lock.h"
#include "edgelock/sentinel.h"

namespace edgelock {
namespace {

// Computed by the compiler: the slot of a constant key costs nothing.
static_assert(crc16("123456789", 9) == 0x31C3, "CRC16/XMODEM check value");
static_assert(key_slot("foo") == 12182, "redis-cli cluster keyslot foo");
static_assert(key_slot("{user1000}.following") == key_slot("{user1000}.followers"), "hash tag");

TEST(KeySlot, MatchesRedis) {
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("hello"), 866);
  EXPECT_EQ(key_slot("123456789"), 12739);
  EXPECT_EQ(key_slot("a"), 15495);
  EXPECT_EQ(key_slot(""), 0);
  EXPECT_EQ(key_slot(Bytes::from_cstr("foo")), 12182);
}

TEST(KeySlot, HashTags) {
  EXPECT_EQ(key_slot("{user1000}.following"), 3443);
  EXPECT_EQ(key_slot("{user1000}.followers"), 3443);
  EXPECT_EQ(key_slot("foo{}{bar}"), 8363) << "empty tag: whole key";
  EXPECT_EQ(key_slot("foo{{bar}}zap"), 4015) << "tag is '{bar'";
  EXPECT_EQ(key_slot("{bar"), 4015);
  EXPECT_EQ(key_slot("foo{bar}{zap}"), 5061) << "first tag only";
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  const char binary[] = {'k', '\0', '{', 'x', '}'};
  EXPECT_EQ(key_slot(binary, sizeof binary), key_slot("x"));
}

TEST(ClusterKeys, CompanionKeysMustShareTheSlot) {
  Cluster cluster;
  ASSERT_TRUE(cluster.init("redis-cluster://127.0.0.1:7000").ok());
  // Every primitive checks its key at init() (no I/O).
  Lock lock(cluster);
  const auto init = [&lock](const std::string& k) {
    return lock.init(Bytes(k.data(), k.size())).code();
  };
  EXPECT_EQ(init("pump-3"), ErrorCode::kOk);
  EXPECT_EQ(init("site{7}:pump"), ErrorCode::kOk);
  EXPECT_EQ(init("{7}"), ErrorCode::kOk);
  EXPECT_EQ(init("a{b"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(init("x{}y"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(init("a}b"), ErrorCode::kInvalidArgument) << "'{a}b}:fence' would hash 'a', not 'a}b'";
  // A '{' without a tag hashes each companion whole: a key whose ':fence'
  // lands in its slot by chance is still refused (the other companions,
  // a FairLock's wake lists among them, would not).
  int lucky = 0;
  for (int i = 0; i < 200000 && lucky < 3; ++i) {
    const std::string k = "k{" + std::to_string(i);
    if (key_slot(k.c_str()) != key_slot((k + ":fence").c_str())) continue;
    ++lucky;
    EXPECT_EQ(init(k), ErrorCode::kInvalidArgument) << k;
  }
  EXPECT_GT(lucky, 0) << "about 12 such keys in 200,000";
}

TEST(ClusterUrl, SeedsAndCredentials) {
  Cluster c;
  ASSERT_TRUE(c.init("redis-cluster://app:p%40ss@10.0.0.1:7000,[::1]:7001,node-c").ok())
      << c.last_error();
  ASSERT_EQ(c.node_count(), 3u);
  EXPECT_STREQ(c.node(0).endpoint().host, "10.0.0.1");
  EXPECT_EQ(c.node(0).endpoint().port, 7000);
  EXPECT_STREQ(c.node(0).endpoint().user, "app");
  EXPECT_STREQ(c.node(0).endpoint().password, "p@ss");
  EXPECT_STREQ(c.node(1).endpoint().host, "::1");
  EXPECT_STREQ(c.node(2).endpoint().password, "p@ss");
  EXPECT_EQ(c.node(2).endpoint().port, 6379);
  EXPECT_EQ(c.owner_of(0), -1) << "no map before the first refresh";
  ASSERT_TRUE(c.init("redis-cluster://h:1,h:1").ok());
  EXPECT_EQ(c.node_count(), 1u) << "a repeated seed is one node";
}

TEST(ClusterUrl, Refusals) {
  Cluster c;
  EXPECT_EQ(c.init("redis://h:1").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.init("redis-cluster://").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.init("redis-cluster://a:1,,b:2").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.init("redis-cluster://a:1,").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.init("redis-cluster://a:1/2").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.init("redis-cluster://a:99999").code(), ErrorCode::kInvalidArgument);
  std::string many = "redis-cluster://";
  for (size_t i = 0; i <= kMaxClusterNodes; ++i)
    many += (i ? ",h:" : "h:") + std::to_string(1000 + i);
  EXPECT_EQ(c.init(many.c_str()).code(), ErrorCode::kBufferTooSmall);
  EXPECT_NE(std::string(c.last_error()), "");
  ClusterOptions bad;
  bad.wait_replicas = -1;
  EXPECT_EQ(c.init("redis-cluster://h:1", {}, bad).code(), ErrorCode::kInvalidArgument);
  Lock lock(c);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("k")).ok());
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kInvalidArgument) << "not set up";
}

TEST(SentinelUrl, ParsesSentinelsNameAndDb) {
  Sentinel s;
  EXPECT_TRUE(s.init("redis-sentinel://u:pw@10.0.0.1:26379,10.0.0.2:26380/gw-main?db=3").ok())
      << s.last_error();
  EXPECT_TRUE(s.init("redis-sentinel://10.0.0.1:26379/m").ok());
  EXPECT_EQ(s.init("redis-sentinel://10.0.0.1:26379").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.init("redis-sentinel://10.0.0.1:26379/").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.init("redis-sentinel://h:1/m?db=x").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.init("redis-sentinel://h:1/m?x=1").code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      s.init(("redis-sentinel://h:1/" + std::string(kMaxMasterNameLen + 1, 'n')).c_str()).code(),
      ErrorCode::kBufferTooSmall);
  std::string many = "redis-sentinel://";
  for (size_t i = 0; i <= kMaxSentinels; ++i) many += (i ? ",h:" : "h:") + std::to_string(1000 + i);
  EXPECT_EQ(s.init((many + "/m").c_str()).code(), ErrorCode::kInvalidArgument);
  SentinelOptions bad;
  bad.wait_replicas = -1;
  EXPECT_EQ(s.init("redis-sentinel://h:1/m", {}, bad).code(), ErrorCode::kInvalidArgument);
  Lock lock(s);
  ASSERT_TRUE(lock.init(Bytes::from_cstr("k")).ok());
  EXPECT_EQ(lock.try_acquire().code(), ErrorCode::kInvalidArgument) << "failed init()";
}

}  // namespace
}  // namespace edgelock
