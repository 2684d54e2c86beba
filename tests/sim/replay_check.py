#!/usr/bin/env python3
"""A seed replays exactly: the trace hash a seed gets inside a
batch run equals the one `--seed S` gives in a fresh process (so the replay
line a failure prints reproduces it), and two fresh `--seed S --trace` runs
print the same trace, byte for byte.

  replay_check.py EDGELOCK_SIM FIRST_SEED SEEDS
"""

import re
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def trace_of(out):
    # The summary at the end carries the wall time: everything before it.
    lines = out.split("\n")
    end = next((i for i, l in enumerate(lines) if re.match(r"^\d+ runs \(seeds", l)), len(lines))
    return "\n".join(lines[:end])


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    sim, first, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rc, out = run([sim, "--from", str(first), "--seeds", str(n), "--hashes", "--quiet"])
    batch = dict(re.findall(r"^seed (\d+): trace hash ([0-9a-f]{16})$", out, re.M))
    if rc != 0 or len(batch) != n:
        print("batch run failed (rc %d, %d of %d hashes):\n%s" % (rc, len(batch), n, out[-2000:]))
        return 1
    bad = 0
    picks = sorted(set([first, first + n - 1] + list(range(first, first + n, max(1, n // 8)))))
    for seed in picks:
        _, one = run([sim, "--seed", str(seed)])
        m = re.search(r"^seed %d: trace hash ([0-9a-f]{16})$" % seed, one, re.M)
        got = m.group(1) if m else "none"
        if got != batch[str(seed)]:
            print("seed %d: batch hash %s, --seed replay %s" % (seed, batch[str(seed)], got))
            bad += 1
    # The longest trace among the picks, twice, compared byte for byte.
    traced = 0
    for seed in picks[:4]:
        _, a = run([sim, "--seed", str(seed), "--trace"])
        _, b = run([sim, "--seed", str(seed), "--trace"])
        ta, tb = trace_of(a), trace_of(b)
        if ta != tb or ta.count("\n") < 10:
            print("seed %d: two --trace runs differ (or printed no trace): %d and %d lines" %
                  (seed, ta.count("\n"), tb.count("\n")))
            bad += 1
        traced += ta.count("\n")
    print("%d seeds in a batch, %d replayed with --seed: same trace hashes; %d trace lines compared byte "
          "for byte: %s" % (n, len(picks), traced, "ok" if bad == 0 else "%d FAILED" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
