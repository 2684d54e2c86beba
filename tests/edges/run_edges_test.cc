// Timing-edge regression tests (issue 13): the lease keeper and the
// `edgelock` tool (run must not outlive its lease, bounded exits).
#include <gtest/gtest.h>
