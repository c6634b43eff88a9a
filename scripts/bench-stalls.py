#!/usr/bin/env python3
"""Side-by-side loop-stall benchmark: kvstore vs redis-server 7.0.

For each operation, a second connection sends PING after PING while the
operation runs; the longest PING round trip is the time the server's event
loop was unavailable to everybody else. Peak memory is the growth of the
server's VmHWM (peak resident set) over the operation, on a fresh server.

  operation                                   what it shows
  UNLINK of a big set                         freeing off the loop
  DEL of a big set (default, lazy-user-del)   freeing in place vs. lazily
  FLUSHALL ASYNC / FLUSHDB ASYNC, many keys   swapping the keyspace out
  SET of a huge value                         reading a value into its final buffer
  SETRANGE creating a huge string             no copy of the zeroed buffer
  slow reader: GETs of a big value, never read  output bounded per client

Both servers run with the same flags, one at a time, interleaved per round;
the table shows the median over ROUNDS rounds. Stdlib only.

Usage: scripts/bench-stalls.py
Environment: ROUNDS (3), SET_MEMBERS (10000000), KEYS (5000000),
  BIG_VALUE_MB (500), SETRANGE_MB (512), SLOW_VALUE_MB (100), SLOW_GETS (50),
  SLOW_WAIT_S (8), KVSTORE_BIN (target/release/kvstore), REDIS_BIN (redis-server),
  ONLY (comma-separated operation keys to run, e.g. "unlink,set_big").
"""

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_helper import free_port, resp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SET_MEMBERS = int(os.environ.get("SET_MEMBERS", "10000000"))
KEYS = int(os.environ.get("KEYS", "5000000"))
BIG_VALUE = int(os.environ.get("BIG_VALUE_MB", "500")) << 20
SETRANGE_LEN = int(os.environ.get("SETRANGE_MB", "512")) << 20
SLOW_VALUE = int(os.environ.get("SLOW_VALUE_MB", "100")) << 20
SLOW_GETS = int(os.environ.get("SLOW_GETS", "50"))
SLOW_WAIT = float(os.environ.get("SLOW_WAIT_S", "8"))
KV_BIN = os.environ.get("KVSTORE_BIN", os.path.join(ROOT, "target/release/kvstore"))
REDIS_BIN = os.environ.get("REDIS_BIN", "redis-server")
ONLY = set(filter(None, os.environ.get("ONLY", "").split(",")))


class Reader:
    """Minimal RESP reader over a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("closed")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = bytes(self.buf[:i])
                del self.buf[: i + 2]
                return line
            self._fill()

    def reply(self):
        line = self.line()
        kind = line[:1]
        if kind == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data = bytes(self.buf[:n])
            del self.buf[: n + 2]
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(line[1:]))]
        if kind == b"-":
            raise RuntimeError(line.decode(errors="replace"))
        return line[1:]


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.r = Reader(self.sock)

    def cmd(self, *args):
        self.sock.sendall(resp(*args))
        return self.r.reply()

    def pipeline(self, payload, replies):
        """Send pre-encoded commands while reading their replies."""
        t = threading.Thread(target=self.sock.sendall, args=(payload,))
        t.start()
        for _ in range(replies):
            self.r.reply()
        t.join()

    def close(self):
        self.sock.close()


class Pinger:
    """PINGs on its own connection; records the longest round trip."""

    def __init__(self, port):
        self.c = Client(port)
        self.stop_flag = False
        self.worst = 0.0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_flag:
            t0 = time.perf_counter()
            self.c.cmd("PING")
            self.worst = max(self.worst, time.perf_counter() - t0)
            time.sleep(0.001)

    def __enter__(self):
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.stop_flag = True
        self.thread.join()
        self.c.close()


class Server:
    def __init__(self, side):
        self.side = side
        self.dir = tempfile.mkdtemp(prefix=f"stall-{side}-")
        self.port = free_port()
        binary = KV_BIN if side == "kvstore" else REDIS_BIN
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", self.dir, "--logfile", os.path.join(self.dir, "log"),
                "--daemonize", "no", "--enable-debug-command", "yes"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while True:
            try:
                c = Client(self.port)
                if c.cmd("PING") == b"PONG":
                    c.close()
                    break
            except (OSError, RuntimeError):
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"{side} did not start")
            time.sleep(0.05)

    def hwm(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        subprocess.run(["rm", "-rf", self.dir])


def fill_set(c, key, members):
    batch = 10000
    parts = []
    for start in range(0, members, batch):
        end = min(members, start + batch)
        parts.append(resp("SADD", key, *[b"m:%d" % i for i in range(start, end)]))
    c.pipeline(b"".join(parts), len(parts))


def fill_keys(c, n):
    batch = 100
    parts = []
    for start in range(0, n, batch):
        kv = []
        for i in range(start, min(n, start + batch)):
            kv += [b"key:%012d" % i, b"val:%012d" % i]
        parts.append(resp("MSET", *kv))
    c.pipeline(b"".join(parts), len(parts))


def timed(port, action):
    """Run `action` while pinging; the worst PING round trip in ms."""
    with Pinger(port) as p:
        action()
        time.sleep(0.05)
    return p.worst * 1000


# --- the operations: each returns {metric: value} for one server side ---

def op_big_set_deletes(side):
    srv = Server(side)
    out = {}
    try:
        c = Client(srv.port)
        if not ONLY or "unlink" in ONLY:
            fill_set(c, "s", SET_MEMBERS)
            out["unlink"] = timed(srv.port, lambda: c.cmd("UNLINK", "s"))
        if not ONLY or "del" in ONLY:
            fill_set(c, "s", SET_MEMBERS)
            out["del"] = timed(srv.port, lambda: c.cmd("DEL", "s"))
        if not ONLY or "del_lazy" in ONLY:
            c.cmd("CONFIG", "SET", "lazyfree-lazy-user-del", "yes")
            fill_set(c, "s", SET_MEMBERS)
            out["del_lazy"] = timed(srv.port, lambda: c.cmd("DEL", "s"))
            c.cmd("CONFIG", "SET", "lazyfree-lazy-user-del", "no")
        if not ONLY or "flushall" in ONLY:
            fill_keys(c, KEYS)
            out["flushall"] = timed(srv.port, lambda: c.cmd("FLUSHALL", "ASYNC"))
        if not ONLY or "flushdb" in ONLY:
            fill_keys(c, KEYS)
            out["flushdb"] = timed(srv.port, lambda: c.cmd("FLUSHDB", "ASYNC"))
        c.close()
    finally:
        srv.stop()
    return out


def op_set_big(side):
    if ONLY and "set_big" not in ONLY:
        return {}
    payload = resp("SET", "big", b"x" * BIG_VALUE)
    srv = Server(side)
    try:
        c = Client(srv.port)
        before = srv.hwm()

        def send():
            c.sock.sendall(payload)
            c.r.reply()

        stall = timed(srv.port, send)
        grown = srv.hwm() - before
        c.close()
    finally:
        srv.stop()
    return {"set_big": stall, "set_big_rss": grown / BIG_VALUE}


def op_setrange(side):
    if ONLY and "setrange" not in ONLY:
        return {}
    srv = Server(side)
    try:
        c = Client(srv.port)
        stall = timed(srv.port, lambda: c.cmd("SETRANGE", "s", str(SETRANGE_LEN - 1), "x"))
        c.close()
    finally:
        srv.stop()
    return {"setrange": stall}


def op_slow_reader(side):
    if ONLY and "slow" not in ONLY:
        return {}
    srv = Server(side)
    try:
        c = Client(srv.port)
        c.cmd("SET", "big", b"x" * SLOW_VALUE)
        before = srv.hwm()
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", srv.port))

        def send():
            slow.sendall(resp("GET", "big") * SLOW_GETS)
            time.sleep(SLOW_WAIT)

        stall = timed(srv.port, send)
        grown = srv.hwm() - before
        slow.close()
        c.close()
    finally:
        srv.stop()
    return {"slow": stall, "slow_rss": grown / SLOW_VALUE}


ROWS = [
    ("unlink", f"UNLINK of a {SET_MEMBERS:,}-member set", "ms"),
    ("del", f"DEL of a {SET_MEMBERS:,}-member set", "ms"),
    ("del_lazy", "  same, lazyfree-lazy-user-del yes", "ms"),
    ("flushall", f"FLUSHALL ASYNC, {KEYS:,} keys", "ms"),
    ("flushdb", f"FLUSHDB ASYNC, {KEYS:,} keys", "ms"),
    ("set_big", f"SET of a {BIG_VALUE >> 20} MB value", "ms"),
    ("set_big_rss", "  peak RSS growth / value size", "x"),
    ("setrange", f"SETRANGE creating a {SETRANGE_LEN >> 20} MB string", "ms"),
    ("slow", f"slow reader: {SLOW_GETS} x GET of {SLOW_VALUE >> 20} MB, never read ({SLOW_WAIT:g} s)", "ms"),
    ("slow_rss", "  peak RSS growth / value size", "x"),
]


def main():
    if not os.path.exists(KV_BIN):
        subprocess.run(["cargo", "build", "--release"], cwd=ROOT, check=True)
    results = {"kvstore": {}, "redis": {}}
    for rnd in range(ROUNDS):
        for op in (op_big_set_deletes, op_set_big, op_setrange, op_slow_reader):
            for side in ("kvstore", "redis") if rnd % 2 == 0 else ("redis", "kvstore"):
                for k, v in op(side).items():
                    results[side].setdefault(k, []).append(v)
                    print(f"round {rnd + 1} {side:7} {k:12} {v:10.2f}", file=sys.stderr)
    print(f"\nLongest PING on a second connection while the operation ran (median of {ROUNDS} rounds):\n")
    print("| operation | redis-server | kvstore |")
    print("|:---|---:|---:|")
    for key, label, unit in ROWS:
        if key not in results["kvstore"]:
            continue
        med = {s: statistics.median(results[s][key]) for s in results}
        fmt = (lambda v: f"{v:,.0f} ms" if v >= 10 else f"{v:.1f} ms") if unit == "ms" else (lambda v: f"{v:.2f}x")
        print(f"| {label} | {fmt(med['redis'])} | {fmt(med['kvstore'])} |")


if __name__ == "__main__":
    main()
