// Which hiredis and mbedTLS this build compiled against and linked. A build
// configured for another library generation (scripts/test's trixie-libs leg:
// Debian 13's hiredis 1.2 and mbedTLS 3.6 from a private prefix) sets
//   EDGELOCK_EXPECT_HIREDIS=1.2  EDGELOCK_EXPECT_MBEDTLS=3.6
// and this test fails if Debian 12's libraries were used instead.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "transport/library_info.h"

namespace edgelock {
namespace {

// "1.2" matches "1.2.0" and "1.2.7", not "1.20.0".
bool version_matches(const std::string& version, const std::string& prefix) {
  return version.compare(0, prefix.size(), prefix) == 0 &&
         (version.size() == prefix.size() || version[prefix.size()] == '.');
}

TEST(LibraryInfo, VersionMatching) {
  EXPECT_TRUE(version_matches("3.6.6", "3.6"));
  EXPECT_TRUE(version_matches("3.6.6", "3.6.6"));
  EXPECT_FALSE(version_matches("3.60.0", "3.6"));
  EXPECT_FALSE(version_matches("2.28.3", "3.6"));
}

TEST(LibraryInfo, LinkedWhatItCompiledAgainst) {
  detail::LibraryInfo info;
  detail::library_info(&info);
  const std::string hiredis = std::to_string(info.hiredis_major) + "." +
                              std::to_string(info.hiredis_minor) + "." +
                              std::to_string(info.hiredis_patch);
  std::printf("hiredis %s (headers; 1.x also checked at link time)\n", hiredis.c_str());
  std::printf("mbedTLS headers %s, linked %s, highest protocol %s\n",
              info.tls_compiled[0] ? info.tls_compiled : "(no TLS)", info.tls_linked,
              info.tls_max[0] ? info.tls_max : "-");
  EXPECT_TRUE(info.hiredis_major == 0 ? info.hiredis_minor >= 14 : info.hiredis_major == 1);
  // The headers and the library mbedTLS reports at run time are one version.
  EXPECT_STREQ(info.tls_compiled, info.tls_linked);
  const std::string tls = info.tls_linked;
  if (!tls.empty()) {
    EXPECT_EQ(std::string(info.tls_max), version_matches(tls, "2.28") ? "TLSv1.2" : "TLSv1.3");
  }
  if (const char* want = std::getenv("EDGELOCK_EXPECT_HIREDIS")) {
    EXPECT_TRUE(version_matches(hiredis, want)) << "hiredis " << hiredis << ", expected " << want;
  }
  if (const char* want = std::getenv("EDGELOCK_EXPECT_MBEDTLS")) {
    EXPECT_TRUE(version_matches(tls, want)) << "mbedTLS " << tls << ", expected " << want;
  }
}

}  // namespace
}  // namespace edgelock
