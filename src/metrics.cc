// Heap-free counters and the event hook.
#include "edgelock/metrics.h"

#include <cstdio>

#include "edgelock/detail/connection_io.h"
#include "metrics_note.h"

namespace edgelock {

const char* to_string(EventKind kind) {
  switch (kind) {
    case EventKind::kAcquire: return "acquire";
    case EventKind::kAdmit: return "admit";
    case EventKind::kRelease: return "release";
    case EventKind::kExtend: return "extend";
    case EventKind::kCheck: return "check";
    case EventKind::kReconnect: return "reconnect";
  }
  return "unknown";
}

size_t latency_bucket(Nanos latency) {
  size_t i = 0;
  while (i < kLatencyBuckets - 1 && latency > kLatencyBucketBounds[i]) ++i;
  return i;
}

void Metrics::record(EventKind kind, Status status, Nanos latency) {
  const bool attempt = kind == EventKind::kAcquire || kind == EventKind::kAdmit;
  if (kind == EventKind::kReconnect) {
    ++reconnects;
    return;
  }
  if (attempt) {
    ++attempts;
    ++this->latency[latency_bucket(latency)];
  }
  switch (status.code()) {
    case ErrorCode::kOk:
      if (attempt) ++grants;
      break;
    case ErrorCode::kBusy:
      ++busy;
      break;
    case ErrorCode::kNotOwner:
      ++not_owner;
      // Not ours on extend/check: a lease we believed held is gone.
      if (kind == EventKind::kExtend || kind == EventKind::kCheck) ++lost_leases;
      break;
    case ErrorCode::kTimeout:
      ++timeouts;
      break;
    case ErrorCode::kNotHeld:
    case ErrorCode::kInvalidArgument:
      break;  // caller mistakes, not system behaviour
    default:
      ++errors;
      break;
  }
}

Result<size_t> format_metrics(const Metrics& m, char* buf, size_t cap) {
  if (!buf || cap == 0) return ErrorCode::kBufferTooSmall;
  int n = std::snprintf(buf, cap,
                        "attempts=%u grants=%u busy=%u not_owner=%u timeouts=%u lost_leases=%u "
                        "reconnects=%u errors=%u",
                        m.attempts, m.grants, m.busy, m.not_owner, m.timeouts, m.lost_leases,
                        m.reconnects, m.errors);
  size_t len = n < 0 ? cap : static_cast<size_t>(n);
  for (size_t i = 0; i < kLatencyBuckets && len < cap; ++i) {
    n = i + 1 < kLatencyBuckets
            ? std::snprintf(buf + len, cap - len, " le%lldms=%u",
                            static_cast<long long>(kLatencyBucketBounds[i].count()), m.latency[i])
            : std::snprintf(buf + len, cap - len, " gt%lldms=%u",
                            static_cast<long long>(kLatencyBucketBounds[i - 1].count()), m.latency[i]);
    len += n < 0 ? cap : static_cast<size_t>(n);
  }
  if (len >= cap) return ErrorCode::kBufferTooSmall;
  return len;
}

namespace detail {

void note(Connection& conn, Metrics& own, EventKind kind, Status status, Bytes key, Nanos latency) {
  own.record(kind, status, latency);
  io(conn).note_event(kind, status, key, latency);
}

}  // namespace detail
}  // namespace edgelock
