// Timing-edge regression tests (issue 13): the `edgelock` tool's bounded
// exits, clean-up after a failed acquire and its exit codes.
#include <gtest/gtest.h>
