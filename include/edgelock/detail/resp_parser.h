#pragma once
// Internal: a connection's RESP2 reply parser with its fixed receive buffer
// and reply nodes (implemented in src/resp/parser.cc). Declared here, with
// plain members only, so a Connection can hold it by value.
//
// Bytes go in through space()/commit(); next() parses the next whole reply
// in one pass straight into the nodes, with strings pointing into the
// buffer. Replies stay valid until release(): until then the buffer is only
// appended to, never moved, and the nodes are never reused. After
// release(), space() moves any unread bytes (a partial or a further reply)
// to the front of the buffer.

#include <cstddef>
#include <cstdint>

#include "edgelock/limits.h"
#include "edgelock/reply.h"
#include "edgelock/status.h"

namespace edgelock {
namespace resp {

class Parser {
 public:
  Parser() = default;
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  /// Free space at the end of the buffer to receive into (*avail bytes;
  /// 0 when the buffer is full). Compacts first if no reply is live.
  uint8_t* space(size_t* avail);
  /// Marks `n` bytes written at space() as received (n <= *avail).
  void commit(size_t n);

  /// The next whole reply in *out, or nullptr in *out if more bytes are
  /// needed (then nothing is consumed and the buffer is unchanged). On
  /// success the reply's bytes are consumed exactly and it stays valid
  /// until release(). On an error *why says why in a few words.
  /// Errors: kProtocol (not strict RESP2, RESP3 types included),
  /// kBufferTooSmall (a string over kMaxReplyStringLen, more values than
  /// kReplyNodes in the replies since release()).
  Status next(const Reply** out, const char** why);

  /// Bytes received but not yet consumed by a reply.
  size_t unread() const { return end_ - start_; }

  /// Ends the life of every reply returned so far: their nodes are reused
  /// and their bytes may be overwritten.
  void release();
  /// Drops everything (a new connection starts with an empty buffer).
  void clear();

 private:
  Reply nodes_[kReplyNodes];
  uint8_t buf_[kRxBufferSize];
  size_t start_ = 0;       // first unread byte
  size_t end_ = 0;         // one past the last received byte
  size_t used_nodes_ = 0;  // nodes taken by live replies
  bool live_ = false;      // a reply was returned since release()
};

}  // namespace resp
}  // namespace edgelock
