// edgelock-bench-baseline: the round-trip limit, with bare hiredis. One
// cycle = SET key token NX PX ttl, then EVALSHA of an owner-checked delete,
// on every --url: one server after the other (--mode seq, what a
// sequential Redlock client pays) or all at once (--mode par: every
// request written before any reply is read). The token is 16 bytes from
// getrandom(), as any correct lock needs. Prints the same JSON line as
// edgelock-bench, peer "hiredis" / "hiredis-seq" / "hiredis-par".
#include <hiredis/hiredis.h>
#include <sys/random.h>

#include <cstdio>
#include <cstring>

#include "bench_util.h"
#include "edgelock/endpoint.h"

namespace {

using bench::Args;

constexpr const char* kDelete =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

struct Peer {
  redisContext* ctx = nullptr;
  char sha[64] = {};
};

bool open_peer(const char* url, Peer& p) {
  edgelock::Endpoint ep;
  if (!edgelock::parse_url(url, &ep).ok()) return false;
  p.ctx = redisConnect(ep.host, ep.port);
  if (!p.ctx || p.ctx->err) return false;
  redisReply* r = static_cast<redisReply*>(redisCommand(p.ctx, "SCRIPT LOAD %s", kDelete));
  const bool ok = r && r->type == REDIS_REPLY_STRING;
  if (ok) std::snprintf(p.sha, sizeof p.sha, "%s", r->str);
  freeReplyObject(r);
  return ok;
}

bool expect(redisReply* r, bool (*check)(const redisReply*)) {
  const bool ok = r && check(r);
  freeReplyObject(r);
  return ok;
}
bool is_ok(const redisReply* r) { return r->type == REDIS_REPLY_STATUS; }
bool is_one(const redisReply* r) { return r->type == REDIS_REPLY_INTEGER && r->integer == 1; }

bool cycle_seq(Peer* peers, int n, const char* key, const char* token, const char* ttl) {
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    ok &= expect(
        static_cast<redisReply*>(redisCommand(peers[i].ctx, "SET %s %s NX PX %s", key, token, ttl)),
        is_ok);
  }
  for (int i = 0; i < n; ++i) {
    ok &= expect(static_cast<redisReply*>(
                     redisCommand(peers[i].ctx, "EVALSHA %s 1 %s %s", peers[i].sha, key, token)),
                 is_one);
  }
  return ok;
}

// Writes the request to every server, then reads every reply.
bool fan_out(Peer* peers, int n, bool (*check)(const redisReply*)) {
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    int done = 0;
    while (!done && redisBufferWrite(peers[i].ctx, &done) == REDIS_OK) {
    }
  }
  for (int i = 0; i < n; ++i) {
    void* r = nullptr;
    ok &= redisGetReply(peers[i].ctx, &r) == REDIS_OK && expect(static_cast<redisReply*>(r), check);
  }
  return ok;
}

bool cycle_par(Peer* peers, int n, const char* key, const char* token, const char* ttl) {
  for (int i = 0; i < n; ++i)
    redisAppendCommand(peers[i].ctx, "SET %s %s NX PX %s", key, token, ttl);
  bool ok = fan_out(peers, n, is_ok);
  for (int i = 0; i < n; ++i)
    redisAppendCommand(peers[i].ctx, "EVALSHA %s 1 %s %s", peers[i].sha, key, token);
  return fan_out(peers, n, is_one) && ok;
}

bool new_token(char* hex) {
  unsigned char raw[16];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) return false;
  for (int i = 0; i < 16; ++i) std::snprintf(hex + 2 * i, 3, "%02x", raw[i]);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!bench::parse_args(argc, argv, &a, "edgelock-bench-baseline")) return 2;
  const bool par = std::strcmp(a.mode, "par") == 0;
  static Peer peers[bench::kMaxUrls];
  for (int i = 0; i < a.nurls; ++i) {
    if (!open_peer(a.urls[i], peers[i])) {
      std::fprintf(stderr, "baseline: cannot use %s\n", a.urls[i]);
      return 1;
    }
  }
  char ttl[24], token[40];
  std::snprintf(ttl, sizeof ttl, "%ld", a.ttl_ms);
  static bench::Histogram latency;
  long errors = 0;
  const int64_t t0 = bench::now_ns();
  for (long i = 0; i < a.cycles; ++i) {
    const int64_t c0 = bench::now_ns();
    const bool ok = new_token(token) && (par ? cycle_par(peers, a.nurls, a.key, token, ttl)
                                             : cycle_seq(peers, a.nurls, a.key, token, ttl));
    errors += !ok;
    latency.add(bench::now_ns() - c0);
  }
  bench::Report r;
  r.peer = a.nurls == 1 ? "hiredis" : par ? "hiredis-par" : "hiredis-seq";
  r.workload = a.nurls == 1 ? "uncontended" : "quorum";
  r.cycles = a.cycles;
  r.seconds = static_cast<double>(bench::now_ns() - t0) / 1e9;
  r.latency = &latency;
  r.commands_per_grant = 2.0 * a.nurls;
  r.errors = errors;
  bench::print_report(r, a.json);
  for (int i = 0; i < a.nurls; ++i) redisFree(peers[i].ctx);
  return errors ? 1 : 0;
}
