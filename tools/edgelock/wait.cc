// edgelock: the wait for a grant, bounded by --wait and --server-wait.
#include "wait.h"

#include "report.h"

namespace cli {

using edgelock::ErrorCode;
using edgelock::Nanos;
using edgelock::TimePoint;

namespace {

// Without the library's events, slices this long keep "last answered" fresh.
constexpr Nanos kBlindSlice = edgelock::Millis(1000);

Nanos min_of(Nanos a, Nanos b) { return a < b ? a : b; }

}  // namespace

bool answered(ErrorCode code) {
  return code == ErrorCode::kOk || code == ErrorCode::kBusy || code == ErrorCode::kNotOwner;
}

bool transient(ErrorCode code, bool quorum) {
  if (code == ErrorCode::kNoQuorum) return quorum;
  switch (code) {
    case ErrorCode::kTimeout:
    case ErrorCode::kIo:
    case ErrorCode::kConnectionClosed:
    case ErrorCode::kConnectFailed:
    case ErrorCode::kNotConnected:
    case ErrorCode::kLoading:
    case ErrorCode::kServerBusy:
    case ErrorCode::kIndeterminate:
    case ErrorCode::kExpired:  // granted after the lease ran out: too slow to use
      return true;
    default: return false;
  }
}

ServerWatch::ServerWatch(const Options& o, edgelock::Clock& clock, edgelock::Connection* conn,
                         bool quorum)
    : o_(o),
      clock_(clock),
      conn_(conn),
      quorum_(quorum),
      wait_end_(edgelock::Deadline::after(
          clock, o.wait_ms == kForeverMs ? edgelock::kForever : Nanos(from_ms(o.wait_ms)))),
      answered_at_(clock.now()) {
  if (conn_) conn_->set_event_hook(&ServerWatch::on_event, this);
}

ServerWatch::~ServerWatch() {
  if (conn_) conn_->set_event_hook(nullptr, nullptr);
}

void ServerWatch::on_event(const edgelock::Event& e, void* self) {
  // Only the attempts tell whether a grant can be had. A reconnect is no
  // answer (a stopped server still completes TCP connects), and neither is
  // the hand-back release after a grant that came too late: it always
  // succeeds, so counting it would restart --server-wait after every
  // useless grant and the wait would never end.
  using edgelock::EventKind;
  if (e.kind == EventKind::kAcquire || e.kind == EventKind::kAdmit) {
    static_cast<ServerWatch*>(self)->saw(e.status);
  }
}

void ServerWatch::saw(edgelock::Status s) {
  const TimePoint now = clock_.now();
  if (answered(s.code())) {
    if (told_) notice_line("%s: the server answers again", o_.key);
    answered_at_ = now;
    told_ = false;
    return;
  }
  const Nanos budget = answered_at_ + from_ms(o_.server_wait_ms) - now;
  const Nanos left = min_of(budget, wait_end_.remaining(clock_));
  if (told_ || !transient(s.code(), quorum_) || left <= Nanos::zero()) return;
  const char* why =
      s.code() == ErrorCode::kExpired ? "grants arrive after their lease ran out" : cause_text(s);
  notice_line("%s: the server is not answering in time (%s); retrying for up to %lld ms (%s)",
              o_.key, why, to_ms(left), budget <= left ? "--server-wait" : "--wait");
  told_ = true;
}

Nanos ServerWatch::next_slice() const {
  Nanos slice = answered_at_ + from_ms(o_.server_wait_ms) - clock_.now();
  if (!conn_) slice = min_of(slice, kBlindSlice);
  slice = min_of(slice, wait_end_.remaining(clock_));
  return slice > Nanos::zero() ? slice : Nanos::zero();
}

bool ServerWatch::go_on(edgelock::Status s, WaitResult* out) {
  if (!conn_) saw(s);  // with the hook, every attempt was seen already
  if (!answered(s.code()) && !transient(s.code(), quorum_)) return false;
  if (wait_end_.expired(clock_)) return false;
  const Nanos silent = clock_.now() - answered_at_;
  if (silent >= from_ms(o_.server_wait_ms)) {
    out->silent = true;
    out->silent_ms = to_ms(silent);
    return false;
  }
  return true;
}

int report_silent(const Options& o, const WaitResult& r) {
  return fail(
      "no_answer", kExitServer,
      "%s: the server is not answering in time: no usable answer for %lld ms (--server-wait %lld);"
      " giving up",
      o.key, r.silent_ms, static_cast<long long>(o.server_wait_ms));
}

}  // namespace cli
