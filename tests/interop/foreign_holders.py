#!/usr/bin/env python3
"""Locks of other libraries on the same key, against a real redis-server.

redis-py's Lock (python3-redis) and the edgelock tool exclude each other in
both directions; a key held by a hash-based lock (Redisson's format: HSET
key <uuid>:<thread> 1 with a TTL) is busy for edgelock (exit 1, the kind
named), never a server error, and its release is "not the owner".

Usage: foreign_holders.py EDGELOCK [REDIS_SERVER]. Exit 77 (skip) without
redis-py or a server program; the server runs on a free loopback port and
is stopped by its PID.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import redis
except ImportError:
    print("SKIP: python3-redis is not installed")
    sys.exit(77)

failures = []


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(program):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="edgelock-interop-")
    proc = subprocess.Popen([program, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", tmp],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(200):
        try:
            if client.ping():
                return proc, port, client, tmp
        except redis.exceptions.ConnectionError:
            time.sleep(0.025)
    proc.kill()
    sys.exit("redis-server did not answer")


def tool(cli, url, *args):
    r = subprocess.run([cli, "-u", url] + list(args), capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def main():
    cli = sys.argv[1]
    program = sys.argv[2] if len(sys.argv) > 2 else (os.environ.get("EDGELOCK_TEST_SERVER") or
                                                     shutil.which("redis-server"))
    if not program:
        print("SKIP: no redis-server")
        sys.exit(77)
    proc, port, r, tmp = start_server(program)
    url = "redis://127.0.0.1:%d" % port
    try:
        # redis-py holds: edgelock is refused, and the other way round.
        py = r.lock("modem", timeout=10)
        check(py.acquire(blocking=False), "redis-py acquires a free key")
        code, _, err = tool(cli, url, "-w", "0", "acquire", "modem")
        check(code == 1, "edgelock acquire is busy while redis-py holds it (exit %d: %s)" %
              (code, err.strip()))
        py.release()
        code, out, _ = tool(cli, url, "-w", "0", "acquire", "modem")
        check(code == 0, "edgelock acquires once redis-py released (exit %d)" % code)
        token = out.split()[0] if out.split() else ""
        other = r.lock("modem", timeout=10)
        check(not other.acquire(blocking=False), "redis-py is refused while edgelock holds it")
        code, _, _ = tool(cli, url, "release", "modem", token)
        check(code == 0, "edgelock releases its own lease (exit %d)" % code)
        check(other.acquire(blocking=False), "redis-py acquires after edgelock released")
        other.release()

        # A hash-based holder: busy, named, never a server error.
        r.hset("bus", "8e6f2c1a-uuid:1", 1)
        r.pexpire("bus", 10000)
        code, _, err = tool(cli, url, "-w", "0", "acquire", "bus")
        check(code == 1, "acquire of a hash-held key is busy (exit %d: %s)" % (code, err.strip()))
        check("hash" in err, "the busy message names the holder's kind: %s" % err.strip())
        code, _, err = tool(cli, url, "--fair", "-w", "0", "acquire", "bus")
        check(code == 1, "a fair acquire of a hash-held key is busy (exit %d: %s)" %
              (code, err.strip()))
        code, _, err = tool(cli, url, "release", "bus", "0123456789abcdef")
        check(code == 5, "release of a hash-held key is not the owner (exit %d: %s)" %
              (code, err.strip()))
        code, _, err = tool(cli, url, "extend", "bus", "0123456789abcdef")
        check(code == 5, "extend of a hash-held key is not the owner (exit %d: %s)" %
              (code, err.strip()))
        check(r.hget("bus", "8e6f2c1a-uuid:1") == b"1", "the hash holder is left alone")
        code, out, _ = tool(cli, url, "status", "bus")
        check(code == 0 and "held" in out, "status says held (exit %d: %s)" % (code, out.strip()))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
