#pragma once
// The hiredis reader behind a transport (private; implemented in reader.cc).

#include <cstdio>

#include "transport/transport.h"

namespace edgelock {
namespace detail {

/// A reader whose replies go to `arena`, with `capacity` bytes of input
/// buffer reserved now (setup) so reading never allocates later.
void* reader_create(ReplyArena* arena, size_t capacity);
void reader_free(void* reader);
/// Free space at the end of the input buffer (after compacting).
uint8_t* reader_space(void* reader, size_t* avail);
/// Marks `n` bytes written into reader_space() as input.
void reader_commit(void* reader, size_t n);
/// Bytes received but not yet parsed into a reply.
size_t reader_pending(const void* reader);
/// The next reply, nullptr if incomplete. Input is checked strictly
/// (resp_check.h) before hiredis parses it. Errors: kProtocol,
/// kBufferTooSmall.
Result<const Reply*> reader_next(void* reader, ReplyArena& arena, ErrorText& err);

}  // namespace detail
}  // namespace edgelock
