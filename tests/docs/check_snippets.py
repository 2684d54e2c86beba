#!/usr/bin/env python3
"""Compiles every ```cpp block of README.md and docs/*.md.

    check_snippets.py ROOT PRELUDE [--control] -- COMPILER ARGS...

Each block becomes one translation unit: snippet_prelude.h, the block's
#include and using-namespace lines, then the rest inside a function body
(int, so a snippet may return), with #line pointing at the markdown. The
compiler runs with the project's warning flags and -Werror, -fsyntax-only:
a discarded [[nodiscard]] Status, a stale name or a placeholder that is
not C++ fails the test, naming the file and line.

--control compiles a planted block that discards a Status and must fail.
"""
import glob
import os
import subprocess
import sys
import tempfile

CONTROL = """LeaseKeeper keeper(lock);
keeper.start();
"""


def blocks(path):
    """(first line number, text) of each ```cpp block in `path`."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            start = i + 2  # 1-based number of the first code line
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            out.append((start, "\n".join(body)))
        i += 1
    return out


def translation_unit(prelude, path, start, text):
    head, body = [], []
    for line in text.split("\n"):
        stripped = line.strip()
        top = stripped.startswith("#include") or stripped.startswith("using namespace")
        (head if top and not body else body).append(line)
    return "\n".join(
        ['#include "%s"' % prelude]
        + head
        + ["namespace {", "[[maybe_unused]] int snippet() {", "  {",
           '#line %d "%s"' % (start + len(head), path)]
        + body
        + ["  }", "  return 0;", "}", "}  // namespace", ""])


def compiles(cmd, source):
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write(source)
        name = f.name
    try:
        r = subprocess.run(cmd + ["-fsyntax-only", "-x", "c++", name],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return r.returncode == 0, r.stdout
    finally:
        os.unlink(name)


def main(argv):
    split = argv.index("--")
    root, prelude = argv[1], os.path.abspath(argv[2])
    control = "--control" in argv[3:split]
    cmd = argv[split + 1:]
    if control:
        ok, _ = compiles(cmd, translation_unit(prelude, "control.md", 1, CONTROL))
        if ok:
            print("FAIL: the control (a discarded Status) compiled")
            return 1
        print("ok: the control (a discarded Status) was refused")
        return 0
    files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    count, failed = 0, 0
    for path in files:
        rel = os.path.relpath(path, root)
        for start, text in blocks(path):
            count += 1
            ok, out = compiles(cmd, translation_unit(prelude, rel, start, text))
            if ok:
                print("ok: %s:%d" % (rel, start - 1))
            else:
                failed += 1
                print("FAIL: %s:%d\n%s" % (rel, start - 1, out))
    print("%d C++ blocks, %d failed" % (count, failed))
    if count == 0:
        print("FAIL: no ```cpp block found under %s" % root)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
