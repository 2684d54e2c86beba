#pragma once
// A RESP2 value as the simulated Redis builds and the differential test
// compares it: owned, heap-backed (test code only), with its exact encoding.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace edgelock {
namespace sim {

enum class RType : uint8_t { kNil, kNilArray, kInt, kBulk, kStatus, kError, kArray };

struct RVal {
  RType type = RType::kNil;
  int64_t i = 0;
  std::string s;  // bulk, status or error text (without the '-')
  std::vector<RVal> a;

  static RVal nil() { return RVal(); }
  static RVal nil_array() { return make(RType::kNilArray); }
  static RVal integer(int64_t v) {
    RVal r = make(RType::kInt);
    r.i = v;
    return r;
  }
  static RVal bulk(std::string v) { return text(RType::kBulk, std::move(v)); }
  static RVal status(std::string v) { return text(RType::kStatus, std::move(v)); }
  static RVal error(std::string v) { return text(RType::kError, std::move(v)); }
  static RVal array(std::vector<RVal> v = {}) {
    RVal r = make(RType::kArray);
    r.a = std::move(v);
    return r;
  }
  static RVal ok() { return status("OK"); }

  bool is_error() const { return type == RType::kError; }
  bool is_nil() const { return type == RType::kNil; }

 private:
  static RVal make(RType t) {
    RVal r;
    r.type = t;
    return r;
  }
  static RVal text(RType t, std::string v) {
    RVal r = make(t);
    r.s = std::move(v);
    return r;
  }
};

/// The exact RESP2 bytes of `v`, appended to *out.
void encode(const RVal& v, std::string* out);
std::string encode(const RVal& v);

enum class RParse : uint8_t { kComplete, kIncomplete, kInvalid };

/// Parses one value from [p, p + n); on kComplete *used is its length.
RParse parse_value(const char* p, size_t n, RVal* out, size_t* used);

/// Parses one request (an array of bulk strings, as every client sends) from
/// [p, p + n); on kComplete *used is its length.
RParse parse_request(const char* p, size_t n, std::vector<std::string>* argv, size_t* used);

/// The RESP2 bytes of a request.
std::string encode_request(const std::vector<std::string>& argv);

/// A short printable form for traces ("[1, -2]", "ERR ...", "\"tok\"").
std::string describe(const RVal& v, size_t max_len = 120);

}  // namespace sim
}  // namespace edgelock
