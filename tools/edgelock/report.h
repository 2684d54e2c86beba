#pragma once
// edgelock: what the tool tells its user. Errors and notices are lines on
// stderr ("edgelock: ..."); with --json, stdout also gets one JSON object
// per result and per error, with the field and error names of the table in
// docs/cli.md ("JSON output"). Those names are the tool's own, so they stay
// the same whatever the library calls its error codes.

#include <cstddef>

#include "cli.h"

namespace cli {

// The stable name and exit code for a library error code.
struct ErrorKind {
  const char* name;  // "busy", "timeout", ... (docs/cli.md)
  int exit;
};
ErrorKind error_kind(edgelock::ErrorCode code);
// The cause as a user reads it: the library's name for the code, except
// where that name would mislead (kExpired: "granted too late").
const char* cause_text(edgelock::Status s);

// Output modes, set once from the options.
void set_output(const Options& o);
// "Busy" (held, no permit, not allowed) is exit 1 inside the tool, and
// what -E says at the end: busy_exit() for a JSON object, note_busy() when
// the outcome is busy without fail(), exit_status() in main().
int busy_exit();
void note_busy();
int exit_status(int rc);

// "edgelock: <text>" on stderr, always (not silenced by -q). Not an
// outcome by itself: fail() is.
__attribute__((format(printf, 1, 2))) void error_line(const char* fmt, ...);
// As error_line, silenced by -q (what happened along the way).
__attribute__((format(printf, 1, 2))) void notice_line(const char* fmt, ...);

// The command failed: prints the line on stderr, remembers it as the
// outcome (the --json error object uses it) and returns `exit`.
__attribute__((format(printf, 3, 4))) int fail(const char* name, int exit, const char* fmt, ...);
// As fail(), with name and exit code from error_kind(code).
__attribute__((format(printf, 2, 3))) int fail_with(edgelock::ErrorCode code, const char* fmt, ...);

// Extra fields of the error object: where it happened ("host:port"), and
// that the request may or may not have run.
void note_where(const char* where);
void note_unknown_outcome();

// Called once by main(): with --json, prints the error object for the
// outcome fail() recorded (if any and no result object was printed).
void finish_output();

// One JSON object on one stdout line, fields in the order added:
//   JsonObject j; j.str("key", k).num("fence", f).end(0);
class JsonObject {
 public:
  JsonObject();
  JsonObject& str(const char* name, const char* s);
  JsonObject& str(const char* name, const char* s, size_t n);
  JsonObject& num(const char* name, long long v);
  JsonObject& flag(const char* name, bool v);
  // Closes the object with "exit"; a nonzero exit also names the error.
  void end(int exit, const char* error = nullptr);
  // Closes the object as it is.
  void close();

 private:
  void name(const char* n);
  bool first_ = true;
};

// Writes `s` as a JSON string literal (quoted, escaped) to stdout.
void print_json_string(const char* s, size_t n);

// The URL with its user-info (user and password) replaced by "***", for
// messages.
void redact_url(const char* url, char* out, size_t size);

}  // namespace cli
