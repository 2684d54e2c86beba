#include "soak_history.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <vector>

namespace edgelock {
namespace soak {

Shared* create_shared(size_t max_grants, bool ignore_fence) {
  const size_t max_writes = max_grants * 2 + 16;
  const size_t bytes = sizeof(Shared) + max_grants * sizeof(Grant) + max_writes * sizeof(Write);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Shared* s = new (p) Shared();
  s->max_grants = max_grants;
  s->max_writes = max_writes;
  s->ignore_fence = ignore_fence;
  s->grant_log = reinterpret_cast<Grant*>(static_cast<char*>(p) + sizeof(Shared));
  s->write_log = reinterpret_cast<Write*>(s->grant_log + max_grants);
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  // A holder may be SIGKILLed or stopped inside; robust keeps the rest going.
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->mu, &a);
  return s;
}

namespace {

void lock(Shared& s) {
  if (pthread_mutex_lock(&s.mu) == EOWNERDEAD) pthread_mutex_consistent(&s.mu);
}

bool fence_ok(const Shared& s, uint64_t fence) {
  return s.ignore_fence || fence >= s.highest_fence;
}

}  // namespace

bool resource_begin(Shared& s, int proc, uint64_t fence, int64_t* value) {
  (void)proc;
  lock(s);
  const bool ok = fence_ok(s, fence);
  if (ok) {
    s.highest_fence = std::max(s.highest_fence, fence);
    *value = s.value;
  } else {
    ++s.rejected;
  }
  pthread_mutex_unlock(&s.mu);
  return ok;
}

bool resource_commit(Shared& s, int proc, uint64_t fence, int64_t value, int64_t now) {
  lock(s);
  const bool ok = fence_ok(s, fence);
  if (ok) {
    s.highest_fence = std::max(s.highest_fence, fence);
    s.value = value;
    ++s.accepted_commits;
  } else {
    ++s.rejected;
  }
  const uint64_t i = s.writes.fetch_add(1);
  if (i < s.max_writes) s.write_log[i] = Write{proc, fence, now, ok};
  pthread_mutex_unlock(&s.mu);
  return ok;
}

Grant* record_grant(Shared& s) {
  const uint64_t i = s.grants.fetch_add(1);
  return i < s.max_grants ? &s.grant_log[i] : nullptr;
}

void record_call(Shared& s, int kind, int64_t took_ns, int64_t budget_ns) {
  if (took_ns > budget_ns) {
    s.overruns.fetch_add(1);
    int64_t w = s.worst_over_ns.load();
    while (took_ns - budget_ns > w &&
           !s.worst_over_ns.compare_exchange_weak(w, took_ns - budget_ns)) {
    }
    s.worst_over_kind = kind;
  }
  int64_t cur = s.slowest_ns.load();
  while (took_ns > cur && !s.slowest_ns.compare_exchange_weak(cur, took_ns)) {
  }
}

Verdict check_history(const Shared& s) {
  Verdict v;
  const size_t n = std::min<uint64_t>(s.grants.load(), s.max_grants);
  std::vector<Grant> g(s.grant_log, s.grant_log + n);
  g.erase(std::remove_if(g.begin(), g.end(), [](const Grant& x) { return x.granted == 0; }),
          g.end());
  v.grants = g.size();
  std::sort(g.begin(), g.end(),
            [](const Grant& a, const Grant& b) { return a.granted < b.granted; });
  // A holder may act from `granted` until its validity ends or it releases.
  int64_t end_max = 0;
  for (const Grant& x : g) {
    if (x.granted < end_max) ++v.overlaps;
    const int64_t end = x.released ? std::min(x.valid_until, x.released) : x.valid_until;
    end_max = std::max(end_max, end);
  }
  const size_t w = std::min<uint64_t>(s.writes.load(), s.max_writes);
  uint64_t highest = 0;
  for (size_t i = 0; i < w; ++i) {
    const Write& x = s.write_log[i];
    if (!x.accepted) continue;
    if (x.fence < highest) ++v.stale_accepted;
    highest = std::max(highest, x.fence);
  }
  const int64_t diff = s.value - s.accepted_commits;
  v.lost_updates = static_cast<uint64_t>(diff < 0 ? -diff : diff);
  v.overruns = s.overruns.load();
  v.rejected = s.rejected;
  return v;
}

}  // namespace soak
}  // namespace edgelock
