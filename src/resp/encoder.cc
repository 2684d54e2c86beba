// RESP command encoding; see encoder.h.
#include "resp/encoder.h"

#include "base/lock_keys.h"

namespace edgelock {
namespace resp {

namespace {
// "*<n>\r\n" or "$<n>\r\n"
size_t header_length(size_t n) { return 1 + decimal_length(static_cast<int64_t>(n)) + 2; }

bool is_companion(Command cmd, size_t i) { return cmd.suffixes && !cmd.suffixes[i].empty(); }

size_t word_length(Command cmd, size_t i) {
  if (!is_companion(cmd, i)) return cmd.args[i].size;
  return detail::companion_length(cmd.args[i], cmd.suffixes[i]);
}

}  // namespace

size_t encoded_length(Command cmd) {
  size_t total = header_length(cmd.count);
  for (size_t i = 0; i < cmd.count; ++i) {
    const size_t n = word_length(cmd, i);
    total += header_length(n) + n + 2;
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
    out.append_decimal(static_cast<int64_t>(word_length(cmd, i)));
    out.append("\r\n", 2);
    if (is_companion(cmd, i)) {
      detail::append_companion(out, cmd.args[i], cmd.suffixes[i]);
    } else {
      out.append(cmd.args[i]);
    }
    out.append("\r\n", 2);
  }
  return out.status();
}

}  // namespace resp
}  // namespace edgelock
