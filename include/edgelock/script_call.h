#pragma once
/// @file script_call.h
/// One script call as a value: the script, its keys and its arguments.
/// Holds views only: the caller keeps the arrays (and the script) alive
/// until the call's reply is read, which for a non-blocking or pipelined
/// call is after the call that started it has returned.

#include "edgelock/bytes.h"
#include "edgelock/script.h"
#include "edgelock/span.h"

namespace edgelock {

// Every member has a default, so a brace list may stop early ({&script})
// without -Wmissing-field-initializers.
struct ScriptCall {
  const Script* script = nullptr;
  /// KEYS[1..]: every key of one call shares one server (and cluster slot).
  Span<const Bytes> keys = {};
  /// ARGV[1..].
  Span<const Bytes> args = {};
  /// The script writes, and a positive integer reply means it granted or
  /// extended a lease: a replicated back end may confirm it with its
  /// replicas (WAIT) before reporting success.
  bool writes_lease = false;
  /// The library's companion keys, named when the call is encoded: after
  /// `keys`, one more key per suffix here, the companion of keys[0] with it
  /// (":fence" makes "{key}:fence"; hash tags keep the slot). Empty for
  /// other callers' scripts. Needs a non-empty `keys`.
  Span<const Bytes> companions = {};
};

}  // namespace edgelock
