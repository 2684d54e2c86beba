#include "fake_transport.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace edgelock {
namespace test {

std::string resp_int(int64_t v) { return ":" + std::to_string(v) + "\r\n"; }

std::string resp_ints(std::initializer_list<int64_t> values) {
  std::string out = "*" + std::to_string(values.size()) + "\r\n";
  for (int64_t v : values) out += resp_int(v);
  return out;
}

std::string resp_status(const std::string& text) { return "+" + text + "\r\n"; }
std::string resp_error(const std::string& text) { return "-" + text + "\r\n"; }
std::string resp_bulk(const std::string& bytes) {
  return "$" + std::to_string(bytes.size()) + "\r\n" + bytes + "\r\n";
}
std::string resp_nil() { return "$-1\r\n"; }

FakeTransport& FakeTransport::reply(const std::string& bytes, Nanos delay) {
  return reply_chunks({{bytes, delay}});
}

FakeTransport& FakeTransport::reply_chunks(
    const std::vector<std::pair<std::string, Nanos>>& chunks) {
  Entry e;
  e.kind = Kind::kReply;
  e.chunks = chunks;
  script_.push_back(e);
  return *this;
}

FakeTransport& FakeTransport::lose_reply() {
  Entry e;
  e.kind = Kind::kLose;
  script_.push_back(e);
  return *this;
}

FakeTransport& FakeTransport::reset_after(Nanos delay) {
  Entry e;
  e.kind = Kind::kReset;
  e.delay = delay;
  script_.push_back(e);
  return *this;
}

FakeTransport& FakeTransport::refuse_open(ErrorCode code) {
  open_results_.push_back(code);
  return *this;
}

void FakeTransport::push_unsolicited(const std::string& bytes) {
  deliver(clock_.now(), bytes, false);
}

Status FakeTransport::open(const Endpoint&, const ResolvedHost&, const TlsOptions&, Deadline,
                           Clock&, ErrorText& err) {
  close();
  ++opens_;
  ErrorCode code = ErrorCode::kOk;
  if (!open_results_.empty()) {
    code = open_results_.front();
    open_results_.pop_front();
  }
  if (code != ErrorCode::kOk) {
    std::snprintf(err, sizeof err, "fake: connect refused (%s)", to_string(code));
    return code;
  }
  open_ = true;
  return Status();
}

void FakeTransport::close() {
  if (open_) ++closes_;
  open_ = false;
  out_.clear();  // what was on its way belonged to that stream
  in_.clear();
}

// Keeps the server's bytes in order: a later reply never overtakes an
// earlier one on one stream.
void FakeTransport::deliver(TimePoint at, std::string bytes, bool reset) {
  if (!out_.empty() && out_.back().at > at) at = out_.back().at;
  out_.push_back(Delivery{at, std::move(bytes), reset});
}

bool FakeTransport::due() const {
  return open_ && !out_.empty() && out_.front().at <= clock_.now();
}

TimePoint FakeTransport::next_at() const {
  return out_.empty() ? TimePoint::max() : out_.front().at;
}

// Splits what was written into whole requests (RESP arrays of bulk
// strings) and answers each from the script.
void FakeTransport::take_requests() {
  for (;;) {
    size_t pos = 0;
    std::vector<std::string> words;
    if (in_.empty() || in_[0] != '*') return;
    size_t eol = in_.find("\r\n");
    if (eol == std::string::npos) return;
    const long count = std::strtol(in_.c_str() + 1, nullptr, 10);
    pos = eol + 2;
    for (long i = 0; i < count; ++i) {
      eol = in_.find("\r\n", pos);
      if (eol == std::string::npos) return;
      const size_t len = static_cast<size_t>(std::strtol(in_.c_str() + pos + 1, nullptr, 10));
      if (in_.size() < eol + 2 + len + 2) return;
      words.push_back(in_.substr(eol + 2, len));
      pos = eol + 2 + len + 2;
    }
    in_.erase(0, pos);
    requests_.push_back(words);
    answer(clock_.now());
  }
}

void FakeTransport::answer(TimePoint now) {
  if (script_.empty()) {
    ++unscripted_;
    deliver(now, resp_error("ERR fake: nothing scripted for this request"), false);
    return;
  }
  const Entry e = script_.front();
  script_.pop_front();
  switch (e.kind) {
    case Kind::kLose: return;
    case Kind::kReset: deliver(now + e.delay, std::string(), true); return;
    case Kind::kReply:
      for (const auto& chunk : e.chunks) {
        now += chunk.second;
        deliver(now, chunk.first, false);
      }
      return;
  }
}

Result<size_t> FakeTransport::write_some(const uint8_t* data, size_t n, ErrorText& err) {
  if (!open_) {
    std::snprintf(err, sizeof err, "fake: write on a closed stream");
    return ErrorCode::kConnectionClosed;
  }
  if (write_limit_ > 0 && n > write_limit_) n = write_limit_;
  in_.append(reinterpret_cast<const char*>(data), n);
  take_requests();
  return n;
}

Result<size_t> FakeTransport::read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) {
  if (!open_) {
    std::snprintf(err, sizeof err, "fake: read on a closed stream");
    return ErrorCode::kConnectionClosed;
  }
  if (!due() && may_wait) {
    // A socket waits up to the slice in recv() itself.
    const TimePoint until = clock_.now() + kTransportWaitSlice;
    clock_.set(next_at() <= until ? next_at() : until);
  }
  if (!due()) return static_cast<size_t>(0);
  Delivery& d = out_.front();
  if (d.reset) {
    std::snprintf(err, sizeof err, "fake: connection reset by peer");
    return ErrorCode::kConnectionClosed;
  }
  const size_t n = d.bytes.size() < cap ? d.bytes.size() : cap;
  std::memcpy(dst, d.bytes.data(), n);
  d.bytes.erase(0, n);
  if (d.bytes.empty()) out_.pop_front();
  return n;
}

Result<size_t> FakeTransport::wait(TransportWait* items, size_t n, Deadline deadline, Clock&,
                                   ErrorText&) {
  // When the first of them is ready: writable at once, readable when its
  // next delivery is due.
  TimePoint first = TimePoint::max();
  for (size_t i = 0; i < n; ++i) {
    const FakeTransport* t = static_cast<const FakeTransport*>(items[i].transport);
    const TimePoint at = (items[i].events & kWantWrite) ? clock_.now() : t->next_at();
    if (at < first) first = at;
  }
  const TimePoint now = clock_.now();
  if (first > deadline.when() || first == TimePoint::max()) {
    // Nothing before the deadline: the wait lasts until it.
    if (!deadline.is_never() && deadline.when() > now) clock_.set(deadline.when());
    for (size_t i = 0; i < n; ++i) items[i].ready = 0;
    return static_cast<size_t>(0);
  }
  if (first > now) clock_.set(first);
  size_t ready = 0;
  for (size_t i = 0; i < n; ++i) {
    const FakeTransport* t = static_cast<const FakeTransport*>(items[i].transport);
    const bool w = (items[i].events & kWantWrite) != 0;
    const bool r = (items[i].events & kWantRead) && t->due();
    items[i].ready = static_cast<short>((w ? kWantWrite : 0) | (r ? kWantRead : 0));
    ready += items[i].ready ? 1 : 0;
  }
  return ready;
}

Status setup_fake(Connection& conn, FakeTransport& server, FakeClock& clock,
                  ConnectionOptions options, const char* url) {
  options.clock = &clock;
  options.transport = &server;
  return conn.init(url, options);
}

}  // namespace test
}  // namespace edgelock
