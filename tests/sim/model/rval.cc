#include "model/rval.h"

#include <cstdlib>
#include <cstring>

namespace edgelock {
namespace sim {

void encode(const RVal& v, std::string* out) {
  switch (v.type) {
    case RType::kNil: out->append("$-1\r\n"); return;
    case RType::kNilArray: out->append("*-1\r\n"); return;
    case RType::kInt: out->append(":").append(std::to_string(v.i)).append("\r\n"); return;
    case RType::kBulk:
      out->append("$").append(std::to_string(v.s.size())).append("\r\n");
      out->append(v.s).append("\r\n");
      return;
    case RType::kStatus: out->append("+").append(v.s).append("\r\n"); return;
    case RType::kError: out->append("-").append(v.s).append("\r\n"); return;
    case RType::kArray:
      out->append("*").append(std::to_string(v.a.size())).append("\r\n");
      for (const RVal& e : v.a) encode(e, out);
      return;
  }
}

std::string encode(const RVal& v) {
  std::string s;
  encode(v, &s);
  return s;
}

namespace {

// A header line "<type><text>\r\n" starting at p[0]; false if incomplete.
bool line_at(const char* p, size_t n, size_t* line_len, size_t* text_len) {
  for (size_t k = 1; k + 1 < n; ++k) {
    if (p[k] == '\r' && p[k + 1] == '\n') {
      *text_len = k - 1;
      *line_len = k + 2;
      return true;
    }
  }
  return false;
}

bool to_int(const char* p, size_t n, int64_t* out) {
  if (n == 0 || n > 20) return false;
  std::string t(p, n);
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size()) return false;
  *out = v;
  return true;
}

RParse parse_at(const char* p, size_t n, RVal* out, size_t* used, int depth) {
  if (n == 0) return RParse::kIncomplete;
  if (depth > 8) return RParse::kInvalid;
  size_t line = 0, text = 0;
  if (!line_at(p, n, &line, &text)) return RParse::kIncomplete;
  const char* body = p + 1;
  switch (p[0]) {
    case '+':
      *out = RVal::status(std::string(body, text));
      *used = line;
      return RParse::kComplete;
    case '-':
      *out = RVal::error(std::string(body, text));
      *used = line;
      return RParse::kComplete;
    case ':': {
      int64_t v = 0;
      if (!to_int(body, text, &v)) return RParse::kInvalid;
      *out = RVal::integer(v);
      *used = line;
      return RParse::kComplete;
    }
    case '$': {
      int64_t len = 0;
      if (!to_int(body, text, &len) || len < -1) return RParse::kInvalid;
      if (len == -1) {
        *out = RVal::nil();
        *used = line;
        return RParse::kComplete;
      }
      const size_t total = line + static_cast<size_t>(len) + 2;
      if (n < total) return RParse::kIncomplete;
      *out = RVal::bulk(std::string(p + line, static_cast<size_t>(len)));
      *used = total;
      return RParse::kComplete;
    }
    case '*': {
      int64_t count = 0;
      if (!to_int(body, text, &count) || count < -1) return RParse::kInvalid;
      if (count == -1) {
        *out = RVal::nil_array();
        *used = line;
        return RParse::kComplete;
      }
      RVal arr = RVal::array();
      size_t off = line;
      for (int64_t k = 0; k < count; ++k) {
        RVal e;
        size_t u = 0;
        const RParse r = parse_at(p + off, n - off, &e, &u, depth + 1);
        if (r != RParse::kComplete) return r;
        arr.a.push_back(std::move(e));
        off += u;
      }
      *out = std::move(arr);
      *used = off;
      return RParse::kComplete;
    }
    default: return RParse::kInvalid;
  }
}

}  // namespace

RParse parse_value(const char* p, size_t n, RVal* out, size_t* used) {
  return parse_at(p, n, out, used, 0);
}

RParse parse_request(const char* p, size_t n, std::vector<std::string>* argv, size_t* used) {
  if (n == 0) return RParse::kIncomplete;
  if (p[0] != '*') return RParse::kInvalid;
  RVal v;
  const RParse r = parse_value(p, n, &v, used);
  if (r != RParse::kComplete) return r;
  if (v.type != RType::kArray || v.a.empty()) return RParse::kInvalid;
  argv->clear();
  for (const RVal& e : v.a) {
    if (e.type != RType::kBulk) return RParse::kInvalid;
    argv->push_back(e.s);
  }
  return RParse::kComplete;
}

std::string encode_request(const std::vector<std::string>& argv) {
  std::string out = "*" + std::to_string(argv.size()) + "\r\n";
  for (const std::string& a : argv) {
    out.append("$").append(std::to_string(a.size())).append("\r\n").append(a).append("\r\n");
  }
  return out;
}

namespace {

void describe_into(const RVal& v, std::string* out) {
  switch (v.type) {
    case RType::kNil: out->append("nil"); return;
    case RType::kNilArray: out->append("nil[]"); return;
    case RType::kInt: out->append(std::to_string(v.i)); return;
    case RType::kBulk: out->append("\"").append(v.s).append("\""); return;
    case RType::kStatus: out->append("+").append(v.s); return;
    case RType::kError: out->append("-").append(v.s); return;
    case RType::kArray:
      out->append("[");
      for (size_t k = 0; k < v.a.size(); ++k) {
        if (k) out->append(", ");
        describe_into(v.a[k], out);
      }
      out->append("]");
      return;
  }
}

}  // namespace

std::string describe(const RVal& v, size_t max_len) {
  std::string s;
  describe_into(v, &s);
  if (s.size() > max_len) s = s.substr(0, max_len) + "...";
  return s;
}

}  // namespace sim
}  // namespace edgelock
