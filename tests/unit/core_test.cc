// Status strings, deadlines on a fake clock, backoff bounds, script hashes,
// companion keys, spans and script calls.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <type_traits>

#include "../support/fake_clock.h"
#include "base/lock_keys.h"
#include "edgelock/bytes.h"
#include "edgelock/detail/random.h"
#include "edgelock/script.h"
#include "edgelock/status.h"

namespace edgelock {
namespace {

TEST(Status, EveryCodeHasItsOwnName) {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(ErrorCode::kTlsHostMismatch); ++c) {
    const std::string n = to_string(static_cast<ErrorCode>(c));
    EXPECT_NE(n, "unknown error") << c;
    EXPECT_TRUE(names.insert(n).second) << "duplicate name " << n;
  }
  EXPECT_STREQ(Status(ErrorCode::kNotOwner).to_string(), "not owner");
  EXPECT_TRUE(Status().ok());
  Result<int> r(ErrorCode::kTimeout);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout);
  Result<int> v(7);
  EXPECT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
}

TEST(Deadline, ArithmeticOnFakeClock) {
  FakeClock clock(TimePoint(Millis(5)));
  const Deadline d = Deadline::after(clock, Millis(100));
  EXPECT_EQ(d.remaining(clock), Millis(100));
  EXPECT_EQ(d.poll_timeout_ms(clock), 100);
  clock.advance(Millis(99) + Nanos(1));
  EXPECT_FALSE(d.expired(clock));
  EXPECT_EQ(d.poll_timeout_ms(clock), 1) << "rounds up, never 0 before expiry";
  clock.advance(Millis(1));
  EXPECT_TRUE(d.expired(clock));
  EXPECT_EQ(d.remaining(clock), Nanos::zero());
  EXPECT_EQ(d.poll_timeout_ms(clock), 0);
}

TEST(Deadline, NeverAndOverflow) {
  FakeClock clock(TimePoint(Nanos::max() - Millis(1)));
  EXPECT_TRUE(Deadline::after(clock, Nanos(-1)).is_never());
  EXPECT_TRUE(Deadline::after(clock, kForever).is_never());
  EXPECT_TRUE(Deadline::after(clock, Millis(10)).is_never()) << "saturates instead of wrapping";
  EXPECT_EQ(Deadline::never().poll_timeout_ms(clock), -1);
  FakeClock c2{TimePoint()};
  const Deadline a = Deadline::after(c2, Millis(5)), b = Deadline::after(c2, Millis(3));
  EXPECT_EQ(a.min(b).when(), b.when());
}

TEST(Deadline, LargeValuesStay64Bit) {
  // 30 days in ns exceeds 2^32 many times over; must be exact on 32-bit too.
  FakeClock clock{TimePoint()};
  const Nanos month = Millis(30LL * 24 * 3600 * 1000);
  const Deadline d = Deadline::after(clock, month);
  EXPECT_EQ(d.remaining(clock).count(), 2592000000000000LL);
  EXPECT_EQ(std::chrono::floor<Millis>(d.remaining(clock)).count(), 2592000000LL);
}

TEST(Backoff, BoundsGrowAndCap) {
  Prng rng(42);
  Backoff b(Millis(2), Millis(50));
  Nanos caps[] = {Millis(2), Millis(4), Millis(8), Millis(16), Millis(32), Millis(50), Millis(50)};
  for (Nanos cap : caps) {
    for (int i = 0; i < 200; ++i) {
      Backoff probe = b;
      const Nanos d = probe.next(rng);
      EXPECT_GE(d, Millis(2));
      EXPECT_LE(d, cap);
    }
    (void)b.next(rng);
  }
}

TEST(Backoff, JitterSpreads) {
  Prng rng(7);
  std::set<Nanos> seen;
  for (int i = 0; i < 100; ++i) {
    Backoff b(Millis(1), Millis(100));
    for (int k = 0; k < 6; ++k) (void)b.next(rng);
    seen.insert(b.next(rng));
  }
  EXPECT_GT(seen.size(), 50u);
}

TEST(Random, TokensDifferAndAreHex) {
  char a[32], b[32];
  ASSERT_TRUE(random_hex(a, 16).ok());
  ASSERT_TRUE(random_hex(b, 16).ok());
  EXPECT_NE(std::string(a, 32), std::string(b, 32));
  for (char c : std::string(a, 32)) EXPECT_TRUE(isxdigit(static_cast<unsigned char>(c)));
}

TEST(Script, Sha1KnownVectors) {
  constexpr Script empty = make_script("");
  constexpr Script abc = make_script("abc");
  constexpr Script two_blocks =
      make_script("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_STREQ(empty.sha1, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_STREQ(abc.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_STREQ(two_blocks.sha1, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  static_assert(abc.len == 3, "length computed at compile time");
}

// A span only ever adds const: a read-only view never becomes writable.
static_assert(std::is_convertible<Span<Bytes>, Span<const Bytes>>::value, "adds const");
static_assert(!std::is_convertible<Span<const Bytes>, Span<Bytes>>::value, "never drops const");
constexpr int kThree[3] = {1, 2, 3};
static_assert(Span<const int>(kThree).size() == 3 && Span<const int>(kThree)[2] == 3,
              "a whole C array, at compile time");

TEST(Span, ViewsWithoutCopying) {
  Bytes words[2] = {Bytes::from_cstr("GET"), Bytes::from_cstr("k")};
  const Span<Bytes> all(words);
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all.data(), words);
  EXPECT_FALSE(all.empty());
  all[1] = Bytes::from_cstr("other");
  EXPECT_TRUE(words[1].equals(Bytes::from_cstr("other")));
  const Span<const Bytes> ro = all;
  size_t n = 0;
  for (const Bytes& b : ro) n += b.size;
  EXPECT_EQ(n, 3u + 5u);
  const Span<const Bytes> first(words, 1);
  EXPECT_EQ(first.end() - first.begin(), 1);
  EXPECT_TRUE(Span<const Bytes>().empty());
  EXPECT_EQ(Span<const Bytes>().data(), nullptr);
}

TEST(ScriptCall, BraceListMayStopEarly) {
  static const Script kScript = make_script("return 1");
  const Bytes keys[2] = {Bytes::from_cstr("a"), Bytes::from_cstr("b")};
  const ScriptCall bare{&kScript};
  EXPECT_EQ(bare.script, &kScript);
  EXPECT_TRUE(bare.keys.empty());
  EXPECT_TRUE(bare.args.empty());
  EXPECT_FALSE(bare.writes_lease);
  const ScriptCall call{&kScript, keys, {keys, 1}, true};
  EXPECT_EQ(call.keys.size(), 2u);
  EXPECT_EQ(call.args.size(), 1u);
  EXPECT_TRUE(call.writes_lease);
}

TEST(CompanionKey, SameSlotByHashTag) {
  uint8_t out[64];
  auto name = [&](const char* key) {
    const Result<size_t> r =
        detail::companion_key(Bytes::from_cstr(key), ":fence", out, sizeof out);
    return r.ok() ? std::string(reinterpret_cast<char*>(out), r.value()) : std::string("<error>");
  };
  EXPECT_EQ(name("modem"), "{modem}:fence");
  EXPECT_EQ(name("{dev1}.modem"), "{dev1}.modem:fence");
  EXPECT_TRUE(detail::has_hash_tag(Bytes::from_cstr("a{b}c")));
  EXPECT_FALSE(detail::has_hash_tag(Bytes::from_cstr("a{}c")));
  const std::string long_key(60, 'k');
  EXPECT_EQ(name(long_key.c_str()), "<error>");
}

}  // namespace
}  // namespace edgelock
