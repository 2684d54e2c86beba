#!/usr/bin/env python3
"""Compile-time unit checks: SOURCE must compile with -DCASE_OK and fail to
compile with each -DCASE_<NAME> it lists (each adds one wrong use of a
duration). Fails if the good case does not compile or a bad one does.

Usage: check_compile.py SOURCE -- COMPILER... [FLAGS...]
"""
import re
import subprocess
import sys


def compile_case(cmd, source, case):
    r = subprocess.run(cmd + ['-D' + case, '-fsyntax-only', '-x', 'c++', source],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=300)
    return r.returncode, r.stdout


def main():
    if len(sys.argv) < 4 or sys.argv[2] != '--':
        print(__doc__)
        return 2
    source, cmd = sys.argv[1], sys.argv[3:]
    with open(source) as f:
        cases = re.findall(r'defined\((CASE_\w+)\)', f.read())
    bad = sorted(set(c for c in cases if c != 'CASE_OK'))
    if not bad:
        print('no CASE_ snippets found in ' + source)
        return 1
    rc, out = compile_case(cmd, source, 'CASE_OK')
    if rc != 0:
        print('FAIL: the right units do not compile (or the flags are wrong):\n' + out)
        return 1
    print('ok: CASE_OK compiles')
    failures = 0
    for case in bad:
        rc, out = compile_case(cmd, source, case)
        if rc == 0:
            print('FAIL: %s compiles, but must not' % case)
            failures += 1
        elif 'error' not in out:
            print('FAIL: %s failed without a compiler error:\n%s' % (case, out))
            failures += 1
        else:
            print('ok: %s refused' % case)
    print('%d of %d wrong uses refused' % (len(bad) - failures, len(bad)))
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
