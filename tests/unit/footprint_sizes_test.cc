// The committed fixed-RAM figures of docs/footprint.md against this
// build's sizeof, on each target the unit suite runs on (native x86_64, and
// aarch64 and armhf under qemu in CI): a type that grew or shrank fails
// here until `scripts/footprint` regenerates the document. The budgets of
// 32-bit targets are static_asserts in examples/footprint.cc.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "edgelock/detail/resp_parser.h"
#include "edgelock/edgelock.h"
#include "footprint_types.h"

namespace {

// The name scripts/footprint gives this build's target (nullptr: none).
const char* target_name() {
#if defined(__x86_64__)
  return "native";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__) && defined(__ARM_PCS_VFP)
  return "armhf";
#else
  return nullptr;
#endif
}

// The document's figures are for the Meson options' defaults.
bool default_capacities() {
  using namespace edgelock;
  return kMaxKeyLen == 256 && kTxBufferSize == 1920 && kRxBufferSize == 1024 &&
         kMaxClusterNodes == 8 && kMaxQuorumServers == 7 && kMaxQueuedHandles == 4;
}

// The "type bytes" lines of the block "Fixed RAM ... on <target>".
std::map<std::string, size_t> committed_sizes(const char* path, const std::string& target) {
  std::map<std::string, size_t> sizes;
  FILE* f = std::fopen(path, "r");
  if (!f) return sizes;
  const std::string heading = "Fixed RAM of the public types on " + target + " ";
  bool in_block = false;
  char line[256];
  for (int n = 0; n < 10000 && std::fgets(line, sizeof line, f); ++n) {
    const std::string l(line);
    if (l.rfind("Fixed RAM of the public types on ", 0) == 0) in_block = l.rfind(heading, 0) == 0;
    char name[128];
    size_t bytes = 0;
    if (in_block && std::sscanf(line, "%127s %zu", name, &bytes) == 2) sizes[name] = bytes;
  }
  std::fclose(f);
  return sizes;
}

}  // namespace

TEST(FootprintSizes, CommittedFiguresMatchThisBuild) {
  const char* target = target_name();
  if (!target || !default_capacities()) {
    GTEST_SKIP() << "docs/footprint.md has figures for native, aarch64 and armhf at the "
                    "default capacities only";
  }
  const std::map<std::string, size_t> committed = committed_sizes(EDGELOCK_FOOTPRINT_DOC, target);
  ASSERT_FALSE(committed.empty()) << "no figures for " << target << " in "
                                  << EDGELOCK_FOOTPRINT_DOC;
  size_t checked = 0;
#define EDGELOCK_CHECK_SIZE(T)                                                             \
  {                                                                                        \
    const auto it = committed.find(#T);                                                    \
    if (it == committed.end()) {                                                           \
      ADD_FAILURE() << #T << " is missing from docs/footprint.md (" << target << ")";      \
    } else {                                                                               \
      EXPECT_EQ(it->second, sizeof(T))                                                     \
          << #T << " on " << target << ": docs/footprint.md is stale (scripts/footprint)"; \
      ++checked;                                                                           \
    }                                                                                      \
  }
  EDGELOCK_FOOTPRINT_TYPES(EDGELOCK_CHECK_SIZE)
#undef EDGELOCK_CHECK_SIZE
  EXPECT_EQ(checked, committed.size()) << "docs/footprint.md lists types this build does not";
}
