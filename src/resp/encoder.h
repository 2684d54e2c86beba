#pragma once
// RESP command encoding (private). Two passes, as hiredis does: the exact
// length is computed first and an oversize command is refused before a
// single byte is written.

#include <cstddef>

#include "base/byte_builder.h"
#include "edgelock/bytes.h"

namespace edgelock {
namespace resp {

/// A command: an array of binary-safe arguments. With `suffixes` (one per
/// argument), an argument whose suffix is not empty is written as the
/// companion key of args[i] with that suffix (lock_keys.h), built straight
/// into the output: a handle keeps its key once, not its companions.
struct Command {
  const Bytes* args = nullptr;
  size_t count = 0;
  const Bytes* suffixes = nullptr;
};

/// Exact number of bytes encode_command() will write for `cmd`.
size_t encoded_length(Command cmd);

/// Appends `cmd` as a RESP array of bulk strings.
/// Errors: kInvalidArgument (no arguments), kBufferTooSmall (does not fit;
/// nothing is written).
Status encode_command(ByteBuilder& out, Command cmd);

}  // namespace resp
}  // namespace edgelock
