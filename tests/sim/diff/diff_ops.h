#pragma once
// The differential test's requests: what the library sends (its scripts by
// EVALSHA with the keys and arguments its primitives build, and its plain
// commands), plus set-up steps that put keys into the states those requests
// must cope with (wrong types, a fence counter at its limit, script cache
// flushed, keys about to expire).

#include <cstdint>
#include <string>
#include <vector>

#include "edgelock/script.h"
#include "model/rval.h"

namespace edgelock {
namespace sim {

/// Which integers of a reply depend on the moment the server ran it (TTLs,
/// ms until expiry): those are compared within a tolerance, all else exactly.
enum class Timed : uint8_t {
  kNone,
  kIfNotPositive,       // a lone integer <= 0 (acquire: -pttl)
  kIfNotNegative,       // a lone integer >= 0 (PTTL, owned)
  kWhole,               // a lone integer (extend in 'add' mode)
  kSecondIfZero,        // {0, ms}
  kFirst,               // {pttl, n}
  kFirstIfNotPositive,  // {-wait_ms <= 0, ...} (fair acquire; a grant's fence exact)
  kThird,               // {ok, left, pttl}
};

struct DiffOp {
  std::string label;
  std::vector<std::string> argv;  // EVALSHA form for scripts
  const Script* script = nullptr;
  Timed timed = Timed::kNone;
  bool setup = false;  // a state change, not a library request
  int sleep_ms = 0;    // a pause instead of a request (expiry)
};

/// A random op from the seeded generator state.
DiffOp next_op(uint64_t* rng);

/// True if the two replies agree: equal bytes, or equal apart from timed
/// integers within `tol_ms`.
bool replies_agree(const RVal& model, const RVal& real, Timed timed, int64_t tol_ms);

/// The EVAL form of a script request (after NOSCRIPT).
std::vector<std::string> eval_form(const DiffOp& op);

}  // namespace sim
}  // namespace edgelock
