#pragma once
// The Lua script behind the cluster slot map (private): CLUSTER SLOTS read
// a page at a time, so a map of any size fits the fixed reply arena.

#include "edgelock/script.h"

namespace edgelock {
namespace detail {

// Returns {number of ranges, then start, end, host, port per range} for
// ranges ARGV[1]+1 .. ARGV[1]+3 of CLUSTER SLOTS. Read-only, no keys.
constexpr Script kSlotsPageScript = make_script(
    "local s = redis.call('CLUSTER', 'SLOTS')\n"
    "local out = {#s}\n"
    "local first = tonumber(ARGV[1])\n"
    "for j = first + 1, math.min(first + 3, #s) do\n"
    "  local e = s[j]\n"
    "  out[#out + 1] = e[1]\n"
    "  out[#out + 1] = e[2]\n"
    "  out[#out + 1] = e[3][1]\n"
    "  out[#out + 1] = e[3][2]\n"
    "end\n"
    "return out\n");

}  // namespace detail
}  // namespace edgelock
