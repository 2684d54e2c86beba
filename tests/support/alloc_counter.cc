#include "alloc_counter.h"

#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}

namespace {
std::atomic<bool> g_on{false};
std::atomic<uint64_t> g_mallocs{0}, g_frees{0}, g_news{0}, g_bytes{0};
std::atomic<int64_t> g_live{0}, g_peak{0};

void note_alloc(void* p, size_t n) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  g_mallocs.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(n, std::memory_order_relaxed);
  if (p) {
    const int64_t live = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                         static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
  }
}
void note_free(void* p) {
  if (!p || !g_on.load(std::memory_order_relaxed)) return;
  g_frees.fetch_add(1, std::memory_order_relaxed);
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
}
}  // namespace

extern "C" {
void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  note_alloc(p, n);
  return p;
}
void* calloc(size_t a, size_t b) {
  void* p = __libc_calloc(a, b);
  note_alloc(p, a * b);
  return p;
}
void* realloc(void* old, size_t n) {
  note_free(old);
  void* p = __libc_realloc(old, n);
  note_alloc(p, n);
  return p;
}
void free(void* p) {
  note_free(p);
  __libc_free(p);
}
void* memalign(size_t al, size_t n) {
  void* p = __libc_memalign(al, n);
  note_alloc(p, n);
  return p;
}
void* aligned_alloc(size_t al, size_t n) { return memalign(al, n); }
int posix_memalign(void** out, size_t al, size_t n) {
  *out = memalign(al, n);
  return *out ? 0 : 12;
}
}

void* operator new(size_t n) {
  if (g_on.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  void* p = malloc(n);
  if (!p) std::abort();  // test code: the library itself never calls new
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  if (g_on.load(std::memory_order_relaxed)) g_news.fetch_add(1, std::memory_order_relaxed);
  return malloc(n);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { free(p); }
void operator delete[](void* p) noexcept { free(p); }
void operator delete(void* p, size_t) noexcept { free(p); }
void operator delete[](void* p, size_t) noexcept { free(p); }

namespace edgelock {
namespace test {

void start_counting() {
  g_mallocs = 0;
  g_frees = 0;
  g_news = 0;
  g_bytes = 0;
  g_on = true;
}

AllocCounts stop_counting() {
  g_on = false;
  AllocCounts c;
  c.mallocs = g_mallocs;
  c.frees = g_frees;
  c.news = g_news;
  c.bytes = g_bytes;
  return c;
}

void reset_peak() {
  g_live = 0;
  g_peak = 0;
}
uint64_t peak_bytes() { return static_cast<uint64_t>(g_peak.load()); }
int64_t live_bytes() { return g_live.load(); }

}  // namespace test
}  // namespace edgelock
