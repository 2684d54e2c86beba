// hiredis reply-object functions that build replies in the fixed arena
// instead of the heap. The arena is the reader's privdata.
// hiredis 0.14's sds.h lacks C++ guards; include it first inside them.
extern "C" {
#include <hiredis/sds.h>
}
#include <hiredis/hiredis.h>

#include "error_text.h"
#include "transport/reader.h"
#include "transport/resp_check.h"

namespace edgelock {
namespace detail {

namespace {

ReplyArena& arena_of(const redisReadTask* task) {
  return *static_cast<ReplyArena*>(task->privdata);
}

// A child lives in the slot its parent array reserved; a root gets a node.
Reply* node_for(const redisReadTask* task) {
  if (task->parent) {
    Reply* parent = static_cast<Reply*>(task->parent->obj);
    if (!parent || task->idx < 0 || static_cast<size_t>(task->idx) >= parent->count) {
      return nullptr;
    }
    return const_cast<Reply*>(&parent->elements[task->idx]);
  }
  return arena_of(task).alloc_nodes(1);
}

void* create_string(const redisReadTask* task, char* str, size_t len) {
  Reply* r = node_for(task);
  if (!r) return nullptr;
  // Error text is for people and its first word for classification: keep
  // a bounded prefix so a huge error still reports its class, not an
  // overflow.
  if (task->type == REDIS_REPLY_ERROR && len >= kErrorTextSize) len = kErrorTextSize - 1;
  const char* copy = arena_of(task).store(str, len);
  if (!copy) return nullptr;
  r->type = task->type == REDIS_REPLY_ERROR    ? ReplyType::kError
            : task->type == REDIS_REPLY_STATUS ? ReplyType::kStatus
                                               : ReplyType::kString;
  r->str = copy;
  r->len = len;
  return r;
}

void* create_array(const redisReadTask* task, int elements) {
  Reply* r = node_for(task);
  if (!r) return nullptr;
  r->type = ReplyType::kArray;
  r->count = elements > 0 ? static_cast<size_t>(elements) : 0;
  if (r->count) {
    r->elements = arena_of(task).alloc_nodes(r->count);
    if (!r->elements) return nullptr;
  }
  return r;
}

void* create_integer(const redisReadTask* task, long long value) {
  Reply* r = node_for(task);
  if (!r) return nullptr;
  r->type = ReplyType::kInteger;
  r->integer = value;
  return r;
}

void* create_nil(const redisReadTask* task) {
  Reply* r = node_for(task);
  if (!r) return nullptr;
  r->type = ReplyType::kNil;
  return r;
}

// Arena memory is reclaimed wholesale before each command.
void free_object(void*) {}

redisReplyObjectFunctions kArenaFunctions = {create_string, create_array, create_integer,
                                             create_nil, free_object};

}  // namespace

void* reader_create(ReplyArena* arena, size_t capacity) {
  redisReader* r = redisReaderCreateWithFunctions(&kArenaFunctions);
  if (!r) return nullptr;
  r->privdata = arena;
  r->maxbuf = 0;  // never free and regrow the buffer: it is sized once, here
  // sdsnewlen sizes exactly (sdsMakeRoomFor would double): the buffer is
  // `capacity` bytes, emptied, and never regrown.
  sds exact = sdsnewlen(nullptr, capacity);
  if (!exact) {
    redisReaderFree(r);
    return nullptr;
  }
  sdsclear(exact);
  sdsfree(r->buf);
  r->buf = exact;
  return r;
}

void reader_free(void* reader) {
  if (reader) redisReaderFree(static_cast<redisReader*>(reader));
}

uint8_t* reader_space(void* reader, size_t* avail) {
  redisReader* r = static_cast<redisReader*>(reader);
  if (!r->buf) {
    *avail = 0;
    return nullptr;
  }
  // Drop consumed bytes first (a memmove, no allocation) so the space never
  // needs to grow: sdscatlen is never called on this buffer.
  if (r->pos > 0) {
    sdsrange(r->buf, static_cast<int>(r->pos), -1);
    r->pos = 0;
    r->len = sdslen(r->buf);
  }
  *avail = sdsavail(r->buf);
  return reinterpret_cast<uint8_t*>(r->buf + r->len);
}

void reader_commit(void* reader, size_t n) {
  redisReader* r = static_cast<redisReader*>(reader);
  sdsIncrLen(r->buf, static_cast<ssize_t>(n));
  r->len += n;
}

size_t reader_pending(const void* reader) {
  const redisReader* r = static_cast<const redisReader*>(reader);
  return r && r->buf ? r->len - r->pos : 0;
}

Result<const Reply*> reader_next(void* reader, ReplyArena& arena, ErrorText& err) {
  redisReader* r = static_cast<redisReader*>(reader);
  if (!r->buf || r->len == r->pos) return static_cast<const Reply*>(nullptr);
  // Strict check first: hiredis only ever parses a complete, valid frame.
  RespLimits limits;
  limits.max_bulk = kRxBufferSize;
  limits.max_elements = kReplyNodes - 1;  // the root takes one node
  size_t frame_len = 0;
  const char* why = "invalid";
  switch (resp_check(reinterpret_cast<const uint8_t*>(r->buf + r->pos), r->len - r->pos, limits,
                     &frame_len, &why)) {
    case RespCheck::kIncomplete:
      return static_cast<const Reply*>(nullptr);
    case RespCheck::kInvalid:
      set_error(err, "protocol error: %s", why);
      return ErrorCode::kProtocol;
    case RespCheck::kTooLarge:
      set_error(err, "reply larger than the fixed reply capacities");
      return ErrorCode::kBufferTooSmall;
    case RespCheck::kComplete:
      break;
  }
  void* out = nullptr;
  if (redisReaderGetReply(r, &out) != REDIS_OK) {
    if (arena.overflowed()) {
      set_error(err, "reply exceeds the fixed reply arena");
      return ErrorCode::kBufferTooSmall;
    }
    set_error(err, "protocol error: %s", r->errstr);
    return ErrorCode::kProtocol;
  }
  return static_cast<const Reply*>(out);
}

}  // namespace detail
}  // namespace edgelock
