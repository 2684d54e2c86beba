// Watching the server's TLS records go by (RFC 5246 6.2, RFC 8446 5.1):
// their framing, and the few things still readable in clear text. Used only
// to classify failures: mbedTLS decides everything else.
#include <algorithm>

#include "transport/tls_session.h"

namespace edgelock {
namespace detail {

namespace {

constexpr uint8_t kChangeCipherSpec = 20;
constexpr uint8_t kAlert = 21;
constexpr uint8_t kHandshake = 22;
constexpr uint8_t kHeartbeat = 24;  // the highest content type defined
constexpr uint8_t kCertificateRequest = 13;

// A clear-text handshake byte stream (messages may span records).
void handshake_bytes(TlsWire& w, const uint8_t* p, size_t n) {
  while (n > 0) {
    if (w.hs_hdr_len < sizeof w.hs_hdr) {
      w.hs_hdr[w.hs_hdr_len++] = *p++;
      --n;
      if (w.hs_hdr_len < sizeof w.hs_hdr) continue;
      if (w.hs_hdr[0] == kCertificateRequest) w.cert_requested = true;
      w.hs_left = static_cast<uint32_t>(w.hs_hdr[1]) << 16 |
                  static_cast<uint32_t>(w.hs_hdr[2]) << 8 | w.hs_hdr[3];
      if (w.hs_left == 0) w.hs_hdr_len = 0;
      continue;
    }
    const size_t take = std::min<size_t>(n, w.hs_left);
    w.hs_left -= static_cast<uint32_t>(take);
    p += take;
    n -= take;
    if (w.hs_left == 0) w.hs_hdr_len = 0;
  }
}

// Body bytes [offset, offset + n) of the current record.
void body_bytes(TlsWire& w, const uint8_t* p, size_t n, size_t offset) {
  const uint8_t type = w.hdr[0];
  // A 2-byte alert is clear text (an encrypted one carries a MAC or tag):
  // level, then description.
  if (type == kAlert && w.rec_len == 2 && offset <= 1 && offset + n > 1) {
    w.alert = p[1 - offset];
  }
  if (type == kHandshake && !w.ccs_seen) handshake_bytes(w, p, n);
}

void start_record(TlsWire& w) {
  w.rec_len = static_cast<uint16_t>(w.hdr[3] << 8 | w.hdr[4]);
  w.body_left = w.rec_len;
  // Content types 20..24, protocol major version 3 (SSL 3.0 .. TLS 1.3).
  if (w.hdr[0] < kChangeCipherSpec || w.hdr[0] > kHeartbeat || w.hdr[1] != 3) {
    w.not_tls = true;
    return;
  }
  if (w.hdr[0] == kChangeCipherSpec) w.ccs_seen = true;
  if (w.body_left == 0) w.hdr_len = 0;
}

}  // namespace

void tls_wire_observe(TlsWire& w, const uint8_t* p, size_t n) {
  while (n > 0 && !w.not_tls) {
    if (w.hdr_len < sizeof w.hdr) {
      w.hdr[w.hdr_len++] = *p++;
      --n;
      if (w.hdr_len == sizeof w.hdr) start_record(w);
      continue;
    }
    const size_t take = std::min<size_t>(n, w.body_left);
    body_bytes(w, p, take, w.rec_len - w.body_left);
    w.body_left = static_cast<uint16_t>(w.body_left - take);
    p += take;
    n -= take;
    if (w.body_left == 0) w.hdr_len = 0;
  }
}

bool tls_wire_in_record(const TlsWire& w, size_t* have) {
  if (w.not_tls || w.hdr_len == 0) return false;
  *have = w.hdr_len < sizeof w.hdr ? w.hdr_len
                                   : w.hdr_len + static_cast<size_t>(w.rec_len - w.body_left);
  return true;
}

}  // namespace detail
}  // namespace edgelock
