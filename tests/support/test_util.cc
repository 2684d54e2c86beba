#include "test_util.h"

#include <gtest/gtest.h>

#include "redis_server.h"

namespace edgelock {
namespace test {

namespace {
std::string to_text(const Reply& r) {
  switch (r.type) {
    case ReplyType::kInteger: return std::to_string(r.integer);
    case ReplyType::kNil: return "(nil)";
    case ReplyType::kArray: {
      std::string out;
      for (size_t i = 0; i < r.count; ++i) out += (i ? " " : "") + to_text(r.elements[i]);
      return out;
    }
    default: return std::string(r.str, r.len);
  }
}
}  // namespace

std::string run(Connection& c, std::initializer_list<std::string> args) {
  return run(c, std::vector<std::string>(args));
}

std::string run(Connection& c, const std::vector<std::string>& args) {
  std::vector<Bytes> argv;
  for (const auto& a : args) argv.push_back(Bytes(a.data(), a.size()));
  const Result<const Reply*> r =
      c.command({argv.data(), argv.size()}, Deadline::after(c.clock(), Millis(5000) * slowdown()));
  if (!r.ok()) return std::string("ERR:") + c.last_error();
  return to_text(*r.value());
}

bool open(Connection& c, const std::string& url, Clock* clock) {
  ConnectionOptions o;
  o.connect_timeout = Millis(2000) * slowdown();
  o.command_timeout = Millis(2000) * slowdown();
  o.reconnect_min = Millis(1);
  o.reconnect_max = Millis(10);
  o.clock = clock;
  const Status s = c.init(url.c_str(), o);
  if (!s.ok()) {
    ADD_FAILURE() << "setup " << url << ": " << s.to_string() << " " << c.last_error();
    return false;
  }
  return true;
}

}  // namespace test
}  // namespace edgelock
