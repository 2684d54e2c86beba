// Heap-free counters and the event hook.
#include "edgelock/metrics.h"
#include "base/byte_builder.h"

#include <cstring>

namespace edgelock {

const char* to_string(EventKind kind) {
  // In EventKind's order.
  static const char* const kNames[] = {"acquire", "admit", "release",
                                       "extend",  "check", "reconnect"};
  const size_t i = static_cast<size_t>(kind);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "unknown";
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
    case ErrorCode::kBusy: ++busy; break;
    case ErrorCode::kNotOwner:
      ++not_owner;
      // Not ours on extend/check: a lease we believed held is gone.
      if (kind == EventKind::kExtend || kind == EventKind::kCheck) ++lost_leases;
      break;
    case ErrorCode::kTimeout: ++timeouts; break;
    case ErrorCode::kNotHeld:
    case ErrorCode::kInvalidArgument: break;  // caller mistakes, not system behaviour
    default: ++errors; break;
  }
}

Result<size_t> format_metrics(const Metrics& m, char* buf, size_t cap) {
  if (!buf || cap == 0) return ErrorCode::kBufferTooSmall;
  // Every counter but the histogram: names (NUL-separated) and fields.
  static const char kNames[] =
      "attempts\0grants\0busy\0not_owner\0timeouts\0lost_leases\0"
      "reconnects\0errors";
  static constexpr uint32_t Metrics::*kFields[] = {
      &Metrics::attempts, &Metrics::grants,      &Metrics::busy,       &Metrics::not_owner,
      &Metrics::timeouts, &Metrics::lost_leases, &Metrics::reconnects, &Metrics::errors};
  const char* name = kNames;
  ByteBuilder b(reinterpret_cast<uint8_t*>(buf), cap - 1);  // room for the NUL
  for (size_t i = 0; i < sizeof kFields / sizeof kFields[0]; ++i, name += std::strlen(name) + 1) {
    if (i > 0) b.append_char(' ');
    b.append(Bytes::from_cstr(name));
    b.append_char('=');
    b.append_decimal(m.*kFields[i]);
  }
  // " le1ms=.." for each bound, then " gt1000ms=.." for the open bucket.
  for (size_t i = 0; i < kLatencyBuckets; ++i) {
    const bool open = i + 1 == kLatencyBuckets;
    b.append(open ? " gt" : " le", 3);
    b.append_decimal(kLatencyBucketBounds[open ? i - 1 : i].count());
    b.append("ms=", 3);
    b.append_decimal(m.latency[i]);
  }
  if (!b.status().ok()) return ErrorCode::kBufferTooSmall;
  buf[b.size()] = '\0';
  return b.size();
}
}  // namespace edgelock
