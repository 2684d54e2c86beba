#pragma once
// An invariant check for fuzz targets: names the broken invariant, then
// aborts so libFuzzer saves the input as a crash.
#include <cstdio>
#include <cstdlib>

#define FUZZ_REQUIRE(cond)                                                               \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
