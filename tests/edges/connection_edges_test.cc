// Timing-edge regression tests (issue 13): connection. Each test reproduces one
// defect against a real redis-server (through test::DelayProxy where a
// reply must arrive late or be lost) and asserts the lease invariant at the
// moment it used to break.
#include <gtest/gtest.h>
