#pragma once
// Counts every malloc/calloc/realloc/free/memalign and operator new/delete
// in the process (hiredis and mbedTLS included: they call malloc) while
// counting is on. Link alloc_counter.cc into a test to use it.

#include <cstdint>

namespace edgelock {
namespace test {

struct AllocCounts {
  uint64_t mallocs = 0;  // malloc, calloc, realloc, memalign family
  uint64_t frees = 0;
  uint64_t news = 0;   // operator new (all forms)
  uint64_t bytes = 0;  // requested bytes
  uint64_t total() const { return mallocs + frees + news; }
};

void start_counting();
AllocCounts stop_counting();
/// Peak bytes requested (not freed) since the last reset: for measuring
/// what a TLS handshake allocates.
void reset_peak();
uint64_t peak_bytes();
/// Bytes allocated minus bytes freed (usable sizes) since the last reset,
/// counting only while counting is on: what a setup step kept.
int64_t live_bytes();

}  // namespace test
}  // namespace edgelock
