#pragma once
// Test helpers built on the library itself.

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "edgelock/connection.h"

namespace edgelock {
namespace test {

/// Runs a command; returns the reply as text: strings/status as is,
/// integers in decimal, nil as "(nil)", errors as "ERR:<text>", arrays as
/// space-joined elements.
std::string run(Connection& c, std::initializer_list<std::string> args);
std::string run(Connection& c, const std::vector<std::string>& args);

/// `d` in whole ms, rounded down (for printing and ms arithmetic).
inline int64_t ms(Nanos d) { return std::chrono::floor<Millis>(d).count(); }

/// A connection given init(`url`) with short timeouts suited to tests.
/// Returns false (and fails the calling test via ADD_FAILURE) on error.
bool open(Connection& c, const std::string& url, Clock* clock = nullptr);

}  // namespace test
}  // namespace edgelock
