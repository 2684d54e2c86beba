#pragma once
// Internal: the built-in transport every Connection holds (TCP, unix
// socket, TLS over either). Declared here so a Connection can hold it by
// value; implemented in src/transport/ (hiredis connects, mbedTLS wraps).

#include "edgelock/detail/transport.h"
#include "edgelock/detail/transport_state.h"

namespace edgelock {
namespace detail {

class SocketTransport final : public Transport {
 public:
  SocketTransport() = default;
  ~SocketTransport() { close(); }
  SocketTransport(const SocketTransport&) = delete;
  SocketTransport& operator=(const SocketTransport&) = delete;

  Status open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
              Deadline deadline, Clock& clock, ErrorText& err) override;
  Status start_open(const Endpoint& ep, const ResolvedHost& addrs, const TlsOptions& tls,
                    Deadline deadline, Clock& clock, ErrorText& err) override;
  Status open_step(Clock& clock, ErrorText& err) override;
  bool opening() const override {
    return state_.phase == OpenPhase::kConnecting || state_.phase == OpenPhase::kTls;
  }
  Deadline open_deadline() const override {
    return opening() ? state_.deadline : Deadline::never();
  }
  void close() override;
  bool is_open() const override { return state_.phase == OpenPhase::kOpen; }
  Result<size_t> write_some(const uint8_t* data, size_t n, ErrorText& err) override;
  Result<size_t> read_some(uint8_t* dst, size_t cap, bool may_wait, ErrorText& err) override;
  Result<size_t> wait(TransportWait* items, size_t n, Deadline deadline, Clock& clock,
                      ErrorText& err) override;
  short extra_events() const override { return state_.want_events; }
  bool has_pending_input() const override;
  bool has_stale_input() const override;
  int fd() const override { return state_.fd; }

 private:
  TransportState state_;
};

}  // namespace detail
}  // namespace edgelock
