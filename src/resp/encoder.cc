// RESP command encoding; see encoder.h.
#include "resp/encoder.h"

namespace edgelock {
namespace resp {

namespace {
// "*<n>\r\n" or "$<n>\r\n"
size_t header_length(size_t n) { return 1 + decimal_length(static_cast<int64_t>(n)) + 2; }
}  // namespace

size_t encoded_length(Command cmd) {
  size_t total = header_length(cmd.count);
  for (size_t i = 0; i < cmd.count; ++i) {
    total += header_length(cmd.args[i].size) + cmd.args[i].size + 2;
  }
  return total;
}

Status encode_command(ByteBuilder& out, Command cmd) {
  if (cmd.count == 0 || cmd.args == nullptr) return ErrorCode::kInvalidArgument;
  if (encoded_length(cmd) > out.capacity() - out.size()) {
    return ErrorCode::kBufferTooSmall;
  }
  out.append_char('*');
  out.append_decimal(static_cast<int64_t>(cmd.count));
  out.append("\r\n", 2);
  for (size_t i = 0; i < cmd.count; ++i) {
    out.append_char('$');
    out.append_decimal(static_cast<int64_t>(cmd.args[i].size));
    out.append("\r\n", 2);
    out.append(cmd.args[i]);
    out.append("\r\n", 2);
  }
  return out.status();
}

}  // namespace resp
}  // namespace edgelock
