#pragma once
// The library's Lua scripts, executed natively: one C++ function per
// script, found by the script's SHA-1, which is written out here by hand.
// A script whose text changes gets a new SHA-1 that nothing here knows, so
// the simulated Redis stops loudly (check_native_scripts() at start-up, and
// EVAL/EVALSHA of an unknown body) instead of running a stale model.
//
// Each function follows its script line by line: the same commands through
// Keyspace::call() (as redis.call() would run them), Lua's conversions, and
// Redis 7.0's error texts, including the "script: <sha>, on
// @user_script:<line>." suffix of an error raised by redis.call().

#include <cstdint>
#include <string>
#include <vector>

#include "model/keyspace.h"
#include "model/rval.h"

namespace edgelock {
namespace sim {

struct ScriptRun {
  Keyspace* ks = nullptr;
  const std::vector<std::string>* keys = nullptr;
  const std::vector<std::string>* args = nullptr;
  int64_t now_ms = 0;  // the server's clock, frozen for the whole script
  int64_t now_us = 0;
  std::string sha;
};

using NativeScript = RVal (*)(ScriptRun&);

struct NativeEntry {
  const char* sha;
  const char* name;
  NativeScript fn;
};

/// The native implementation of the script with this SHA-1, or nullptr.
const NativeEntry* find_native(const std::string& sha);
/// Every script in src/*_scripts.h has a native implementation under its
/// current SHA-1; otherwise prints which changed and aborts.
void check_native_scripts();

}  // namespace sim
}  // namespace edgelock
