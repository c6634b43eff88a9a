#!/usr/bin/env python3
"""Side-by-side benchmark of a bulk load written whole before any reply is
read: kvstore against redis-server.

This is how redis-py sends a pipeline (all commands, then all replies) and
how `cat file | nc` loads data. The client writes N `SET key:i value`
commands in one blocking sendall and only then reads the N `+OK` replies.
A server that stops reading a client whose replies are not read deadlocks
here once the replies outgrow the sockets' buffers; the cell then reports
"stuck" after the timeout.

Every cell runs against a fresh server of each kind, alternating which
goes first, for several rounds; the table shows medians and the spread of
the wall time (first byte sent to last reply read) and the server's CPU
(utime+stime from /proc/PID/stat).

Usage: scripts/bench-bulk-pipeline.py [--rounds 3] [--sizes 1000000,3000000,6000000]
       [--timeout 60]
       (KVSTORE_BIN, REDIS_BIN override the binaries; kvstore is built with
       `cargo build --release` first unless KVSTORE_BIN is set)
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_helper import resp  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_writepath():
    """bench-writepath.py's server handling (fresh directory, ephemeral
    port, CPU from /proc), imported from its file (a dashed name)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench-writepath.py")
    spec = importlib.util.spec_from_file_location("bench_writepath", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


wp = load_writepath()


def log(msg):
    print(f"[bench-bulk-pipeline {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr)


def pipeline(n):
    """N SETs of 16-byte keys and values, as one buffer."""
    return b"".join(resp("SET", b"key:%012d" % i, b"val:%012d" % i) for i in range(n))


def run_cell(kind, binary, data, n, timeout):
    """Send `data` whole, then read N `+OK`; (wall seconds, CPU seconds), or
    None when the server stopped answering."""
    server = wp.Server(kind, binary)
    try:
        s = socket.create_connection(("127.0.0.1", server.port))
        s.settimeout(timeout)
        cpu0 = wp.cpu_seconds(server.proc.pid)
        t0 = time.time()
        need = len(b"+OK\r\n") * n
        got = 0
        try:
            s.sendall(data)
            while got < need:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return None
                got += len(chunk)
        except socket.timeout:
            return None
        wall = time.time() - t0
        cpu = wp.cpu_seconds(server.proc.pid) - cpu0
        s.close()
        return wall, cpu
    finally:
        server.stop()


def cell_text(results, pick, fmt):
    if any(r is None for r in results):
        return f"stuck ({sum(r is None for r in results)}/{len(results)} rounds)"
    vals = [pick(r) for r in results]
    return f"{fmt(statistics.median(vals))} [{fmt(min(vals))}–{fmt(max(vals))}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="1000000,3000000,6000000")
    ap.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args()
    kv = os.environ.get("KVSTORE_BIN")
    if not kv:
        subprocess.run(["cargo", "build", "--release"], cwd=REPO, check=True)
        kv = os.path.join(REPO, "target/release/kvstore")
    redis = os.environ.get("REDIS_BIN", "redis-server")
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        data = pipeline(n)
        results = {"kvstore": [], "redis": []}
        for rnd in range(args.rounds):
            order = [("kvstore", kv), ("redis", redis)]
            if rnd % 2:
                order.reverse()
            for kind, binary in order:
                r = run_cell(kind, binary, data, n, args.timeout)
                log(f"{n} SETs round {rnd + 1} {kind}: {r}")
                results[kind].append(r)
        sec = lambda x: f"{x:.2f}"  # noqa: E731
        rows.append(
            [
                f"{n:,} SETs ({len(data) / 1e6:.0f} MB sent, {5 * n / 1e6:.0f} MB of replies)",
                cell_text(results["kvstore"], lambda r: r[0], sec),
                cell_text(results["redis"], lambda r: r[0], sec),
                cell_text(results["kvstore"], lambda r: r[1], sec),
                cell_text(results["redis"], lambda r: r[1], sec),
            ]
        )
    print("## Bulk pipeline written whole before reading\n")
    print(
        f"One client sends N SETs in one write, then reads N replies; {args.rounds} rounds, "
        "fresh servers, interleaved. Medians [min–max].\n"
    )
    print("| pipeline | kvstore wall s | redis wall s | kvstore CPU s | redis CPU s |")
    print("|:---|---:|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
