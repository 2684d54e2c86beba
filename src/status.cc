#include "edgelock/status.h"

namespace edgelock {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kNotOwner: return "not owner";
    case ErrorCode::kNotHeld: return "not held";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kConnectionClosed: return "connection closed";
    case ErrorCode::kConnectFailed: return "connect failed";
    case ErrorCode::kProtocol: return "protocol error";
    case ErrorCode::kServerError: return "server error";
    case ErrorCode::kAuthFailed: return "authentication failed";
    case ErrorCode::kNoAuth: return "authentication required";
    case ErrorCode::kReadOnly: return "read-only server";
    case ErrorCode::kOutOfMemory: return "server out of memory";
    case ErrorCode::kServerBusy: return "server busy running a script";
    case ErrorCode::kLoading: return "server loading dataset";
    case ErrorCode::kBufferTooSmall: return "buffer too small";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotConnected: return "not connected";
    case ErrorCode::kTls: return "TLS error";
    case ErrorCode::kTlsUnavailable: return "TLS unavailable";
    case ErrorCode::kNoQuorum: return "no quorum";
    case ErrorCode::kExpired: return "expired before grant";
    case ErrorCode::kIndeterminate: return "indeterminate";
    case ErrorCode::kRandomFailed: return "random source failed";
    case ErrorCode::kTlsUntrusted: return "TLS certificate not trusted";
    case ErrorCode::kTlsCertTime: return "TLS certificate expired or not yet valid";
    case ErrorCode::kTlsHostMismatch: return "TLS host name mismatch";
  }
  return "unknown error";
}

}  // namespace edgelock
