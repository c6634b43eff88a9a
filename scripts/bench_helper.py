#!/usr/bin/env python3
"""Helper for scripts/bench.sh (stdlib only).

Subcommands:
  free-ports COUNT              print COUNT distinct free TCP ports on 127.0.0.1
  gen-resp N FILE               write N RESP-encoded `SET key:%012d val:%012d`
                                commands (16-byte keys and values) to FILE
  check-csv FILE                validate redis-benchmark --csv output; print
                                the number of data rows
  throughput-table RECORDS      render the throughput Markdown table
  memory-table RECORDS          render the memory Markdown table

RECORDS files are tab-separated, written by bench.sh (see there).
"""

import csv
import os
import socket
import statistics
import sys


def die(msg):
    print(f"bench_helper: error: {msg}", file=sys.stderr)
    sys.exit(1)


# --------------------------------------------------------------------------
# ports / data generation
# --------------------------------------------------------------------------

def free_port():
    """One port nobody listens on now (for a single server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*args):
    """One command as a RESP array of bulk strings (str, bytes or int args)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def free_ports(count):
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        # Keep all bound until every port is chosen so they are distinct.
        print(" ".join(str(s.getsockname()[1]) for s in socks))
    finally:
        for s in socks:
            s.close()


def gen_resp(n, path, batch=100_000):
    if n > 10**12:
        die("gen-resp: N too large for 16-byte keys")
    tmpl = b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$16\r\nval:%012d\r\n"
    with open(path, "wb", buffering=1 << 20) as f:
        for start in range(0, n, batch):
            end = min(n, start + batch)
            f.write(b"".join([tmpl % (i, i) for i in range(start, end)]))


# --------------------------------------------------------------------------
# redis-benchmark CSV
# --------------------------------------------------------------------------

EXPECTED_HEADER = ["test", "rps", "avg_latency_ms", "min_latency_ms",
                   "p50_latency_ms", "p95_latency_ms", "p99_latency_ms",
                   "max_latency_ms"]


def read_csv(path):
    """Return list of dicts (one per benchmark row) or raise ValueError."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if not rows:
        raise ValueError(f"{path}: empty redis-benchmark output")
    header = rows[0]
    if header[:len(EXPECTED_HEADER)] != EXPECTED_HEADER:
        raise ValueError(f"{path}: unexpected CSV header {header!r}")
    out = []
    for r in rows[1:]:
        if len(r) < len(header):
            raise ValueError(f"{path}: short CSV row {r!r}")
        d = dict(zip(header, r))
        try:
            for k in EXPECTED_HEADER[1:]:
                d[k] = float(d[k])
        except ValueError:
            raise ValueError(f"{path}: non-numeric CSV row {r!r}") from None
        out.append(d)
    if not out:
        raise ValueError(f"{path}: no data rows in redis-benchmark output")
    return out


def check_csv(path):
    try:
        rows = read_csv(path)
    except (OSError, ValueError) as e:
        die(str(e))
    print(len(rows))


# --------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------

def fmt_int(x):
    return "n/a" if x is None else f"{x:,.0f}"


def fmt_f(x, nd):
    return "n/a" if x is None else f"{x:.{nd}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def md_table(headers, rows, align):
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join(("---:" if a == "r" else ":---") for a in align) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


# --------------------------------------------------------------------------
# throughput table
# --------------------------------------------------------------------------
# RECORDS columns: test pipeline side requests utime_ticks stime_ticks csvfile
#   side is "kvstore" or "redis"; ticks are server CPU deltas for the run.

def throughput_table(records_path):
    """Medians over rounds, with the min-max spread, per test and pipeline."""
    tck = os.sysconf("SC_CLK_TCK")
    order = []
    data = {}
    with open(records_path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            test, pipe, side, n, ut, st, csvfile = line.split("\t")
            rows = read_csv(csvfile)
            # redis-benchmark may run several sub-benchmarks for one -t name
            # (e.g. lrange); CPU is then spread over all of their requests.
            total_req = int(n) * len(rows)
            cpu_u = int(ut) / tck * 1e6 / total_req
            cpu_s = int(st) / tck * 1e6 / total_req
            for row in rows:
                key = (test, pipe, row["test"])
                if key not in data:
                    data[key] = {}
                    order.append(key)
                data[key].setdefault(side, []).append(
                    dict(row, cpu_u=cpu_u, cpu_s=cpu_s, cpu=cpu_u + cpu_s, n=int(n)))

    def med(runs, k):
        return None if not runs else statistics.median(r[k] for r in runs)

    def spread(runs, k, fmt):
        if not runs or len(runs) < 2:
            return ""
        vals = [r[k] for r in runs]
        return f" [{fmt(min(vals))}–{fmt(max(vals))}]"

    headers = ["test", "P", "rounds", "kvstore rps", "redis rps", "rps ratio",
               "kvstore p50/p99 ms", "redis p50/p99 ms",
               "kvstore CPU µs/req (usr+sys)", "redis CPU µs/req (usr+sys)",
               "CPU ratio"]
    align = ["l", "r", "r", "r", "r", "r", "r", "r", "r", "r", "r"]
    out = []
    for key in order:
        _test, pipe, name = key
        kv = data[key].get("kvstore", [])
        rd = data[key].get("redis", [])

        def rps(runs):
            v = med(runs, "rps")
            return "n/a" if v is None else fmt_int(v) + spread(runs, "rps", fmt_int)

        def lat(runs):
            if not runs:
                return "n/a"
            return f"{med(runs, 'p50_latency_ms'):.3f} / {med(runs, 'p99_latency_ms'):.3f}"

        def cpu(runs):
            if not runs:
                return "n/a"
            return (f"{med(runs, 'cpu'):.3f} ({med(runs, 'cpu_u'):.3f}+{med(runs, 'cpu_s'):.3f})"
                    + spread(runs, "cpu", lambda v: f"{v:.3f}"))

        out.append([
            name, pipe, str(min(len(kv), len(rd))),
            rps(kv), rps(rd),
            fmt_f(ratio(med(kv, "rps"), med(rd, "rps")), 2),
            lat(kv), lat(rd), cpu(kv), cpu(rd),
            fmt_f(ratio(med(kv, "cpu"), med(rd, "cpu")), 2),
        ])
    md_table(headers, out, align)
    print()
    print(f"Medians over rounds, [min–max] spread. rps ratio = kvstore/redis "
          f"(higher is better for kvstore); CPU ratio = kvstore/redis server CPU "
          f"per request (lower is better). CPU from /proc/PID/stat utime+stime, "
          f"{tck} ticks/s.")


# --------------------------------------------------------------------------
# memory table
# --------------------------------------------------------------------------
# RECORDS columns: n side rss_before rss_after used_before used_after
#                  procrss_before procrss_after
#   rss_* from INFO used_memory_rss ("" if missing), used_* from INFO
#   used_memory ("" if missing), procrss_* from /proc/PID/status VmRSS.

def memory_table(records_path):
    data = {}
    order = []
    with open(records_path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            n, side, rb, ra, ub, ua, pb, pa = line.split("\t")
            n = int(n)
            if n not in data:
                data[n] = {}
                order.append(n)

            def per_key(b, a):
                if b == "" or a == "":
                    return None
                return (int(a) - int(b)) / n

            data[n][side] = {
                "rss": per_key(rb, ra),
                "used": per_key(ub, ua),
                "proc": per_key(pb, pa),
            }

    headers = ["keys", "kvstore RSS B/key", "redis RSS B/key", "RSS ratio",
               "kvstore used_memory B/key", "redis used_memory B/key",
               "used_memory ratio", "kvstore /proc RSS B/key",
               "redis /proc RSS B/key"]
    align = ["r"] * len(headers)
    out = []
    notes = []
    for n in order:
        kv = data[n].get("kvstore", {})
        rd = data[n].get("redis", {})
        kv_rss = kv.get("rss")
        if kv_rss is None and kv.get("proc") is not None:
            notes.append(f"{n} keys: kvstore INFO has no used_memory_rss; "
                         "RSS ratio uses /proc VmRSS")
        kv_rss_eff = kv_rss if kv_rss is not None else kv.get("proc")
        for side, d in (("kvstore", kv), ("redis", rd)):
            if d.get("rss") is not None and d.get("proc") is not None \
                    and d["proc"] > 0 \
                    and abs(d["rss"] - d["proc"]) / d["proc"] > 0.10:
                notes.append(f"{n} keys: {side} INFO used_memory_rss delta "
                             f"differs from /proc VmRSS delta by >10%")
        out.append([
            f"{n:,}",
            fmt_f(kv_rss, 1), fmt_f(rd.get("rss"), 1),
            fmt_f(ratio(kv_rss_eff, rd.get("rss")), 2),
            fmt_f(kv.get("used"), 1), fmt_f(rd.get("used"), 1),
            fmt_f(ratio(kv.get("used"), rd.get("used")), 2),
            fmt_f(kv.get("proc"), 1), fmt_f(rd.get("proc"), 1),
        ])
    md_table(headers, out, align)
    print()
    print("B/key = (after - before) / keys, 16-byte keys and 16-byte values "
          "loaded with SET via redis-cli --pipe into a fresh server. "
          "Ratios are kvstore/redis (lower is better for kvstore).")
    for note in notes:
        print(f"- note: {note}")


def read_records(records_path):
    """SIDE<TAB>NAME<TAB>VALUE records as {(name, side): [values]}."""
    vals = {}
    with open(records_path) as f:
        for line in f:
            side, name, v = line.rstrip("\n").split("\t")
            if v:
                vals.setdefault((name, side), []).append(float(v))
    return vals


def median_cell(vals, name, side, spec):
    """'median [min–max]' of one measure of one side, and the median."""
    xs = vals.get((name, side), [])
    if not xs:
        return "n/a", None
    m = statistics.median(xs)
    spread = f" [{min(xs):{spec}}–{max(xs):{spec}}]" if len(xs) > 1 else ""
    return f"{m:{spec}}{spread}", m


def side_table(records_path, title, rows):
    """Medians [min–max] per measure, kvstore beside redis with their ratio.
    Each row is LABEL|NAME|FORMAT-SPEC."""
    vals = read_records(records_path)
    print(f"## {title}")
    print()
    print("| measure | kvstore | redis | ratio |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        label, name, spec = row.split("|")
        k, km = median_cell(vals, name, "kvstore", spec)
        r, rm = median_cell(vals, name, "redis", spec)
        ratio = f"{km / rm:.2f}" if km is not None and rm else "-"
        print(f"| {label} | {k} | {r} | {ratio} |")


def sides_table(records_path, title, sides, rows):
    """Medians [min–max] per measure, one column per side (comma-separated
    SIDES). Each row is LABEL|NAME|FORMAT-SPEC."""
    vals = read_records(records_path)
    sides = sides.split(",")
    # With a side named redis, each other side's ratio to it follows.
    others = [s for s in sides if s != "redis"] if "redis" in sides else []
    heads = sides + [f"{s} ÷ redis" for s in others]
    print(f"## {title}")
    print()
    print("| measure | " + " | ".join(heads) + " |")
    print("| --- |" + " --- |" * len(heads))
    for row in rows:
        label, name, spec = row.split("|")
        cells = [median_cell(vals, name, side, spec) for side in sides]
        r = median_cell(vals, name, "redis", spec)[1] if others else None
        ratios = [
            f"{median_cell(vals, name, s, spec)[1] / r:.2f}"
            if r and median_cell(vals, name, s, spec)[1] is not None
            else "-"
            for s in others
        ]
        print(f"| {label} | " + " | ".join([c[0] for c in cells] + ratios) + " |")


def main(argv):
    if len(argv) < 2:
        die(f"usage: {argv[0]} SUBCOMMAND ...")
    cmd, args = argv[1], argv[2:]
    try:
        if cmd == "free-ports" and len(args) == 1:
            free_ports(int(args[0]))
        elif cmd == "gen-resp" and len(args) == 2:
            gen_resp(int(args[0]), args[1])
        elif cmd == "sides-table" and len(args) >= 4:
            sides_table(args[0], args[1], args[2], args[3:])
        elif cmd == "side-table" and len(args) >= 3:
            side_table(args[0], args[1], args[2:])
        elif cmd == "check-csv" and len(args) == 1:
            check_csv(args[0])
        elif cmd == "throughput-table" and len(args) == 1:
            throughput_table(args[0])
        elif cmd == "memory-table" and len(args) == 1:
            memory_table(args[0])
        else:
            die(f"bad usage: {' '.join(argv[1:])}")
    except (OSError, ValueError) as e:
        die(str(e))


if __name__ == "__main__":
    main(sys.argv)
