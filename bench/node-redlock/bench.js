// node-redlock v5 (ioredis) acquire+release cycles over the servers given,
// for scripts/bench's side-by-side quorum figure. One JSON line out, in the
// fields edgelock-bench --json prints: p50_us, p99_us, ops_per_s.
// Usage: node bench.js --cycles N redis://127.0.0.1:P ...
"use strict";
const Redis = require("ioredis");
const Redlock = require("redlock").default;

async function main() {
  const argv = process.argv.slice(2);
  let cycles = 1000;
  const urls = [];
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === "--cycles") cycles = Number(argv[++i]);
    else urls.push(argv[i]);
  }
  const clients = urls.map((u) => new Redis(u, { enableOfflineQueue: true, maxRetriesPerRequest: 1 }));
  await Promise.all(clients.map((c) => c.ping()));
  // One attempt per acquire, as edgelock-bench's uncontended cycle.
  const redlock = new Redlock(clients, { retryCount: 0, automaticExtensionThreshold: 0 });
  const took = new Float64Array(cycles);
  const warmup = Math.min(200, cycles);
  for (let i = 0; i < warmup; ++i) await (await redlock.acquire(["bench:nr"], 10000)).release();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < cycles; ++i) {
    const a = process.hrtime.bigint();
    const lock = await redlock.acquire(["bench:nr"], 10000);
    await lock.release();
    took[i] = Number(process.hrtime.bigint() - a) / 1000;
  }
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  took.sort();
  const pct = (p) => took[Math.min(cycles - 1, Math.floor(p * cycles))];
  console.log(JSON.stringify({ p50_us: pct(0.5), p99_us: pct(0.99), ops_per_s: cycles / secs, cycles }));
  await Promise.all(clients.map((c) => c.quit()));
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
