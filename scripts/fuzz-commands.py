#!/usr/bin/env python3
"""Differential fuzzing against redis-server: random commands, generated
from Redis's own COMMAND DOCS argument specs (every command, subcommand,
option and token), go to a redis-server and to kvstore; every reply must be
byte-identical. Arguments come from small pools (a few keys of every type,
numbers at their limits, bad numbers, stream IDs, patterns), and about one
command in eight is mutated (an argument dropped, added or replaced) to
reach the error paths. Every few commands the two datasets are compared
(DEBUG DIGEST, OBJECT ENCODING of each key).

A second mode (--config) sets every option of CONFIG GET * to a list of
valid and invalid values on both servers and compares the replies and what
CONFIG GET reads back.

The generated commands can also go in wrapped (--wrap): as COMMAND GETKEYS
or GETKEYSANDFLAGS of the command (every command, the excluded ones too:
nothing runs), or through EVAL (redis.call, redis.pcall, RESP3 inside the
script, a table reply as CJSON). With --notify, both servers publish every
keyspace notification (KEA) to a subscriber each, and what each subscriber
received after every command is compared; --tracking does the same for the
invalidations of a RESP3 client tracking every key (BCAST), and --watch
checks, for every command, whether another client's WATCH of a random key
makes its EXEC fail on both. These three turn active expiry off. A last
mode (--acl) sends random ACL SETUSER rules (passwords, key and channel
patterns, commands, categories, selectors, malformed ones) for a few users
and compares ACL GETUSER, ACL LIST and ACL DRYRUN; command rules that Redis
expands from a category come out in the order of its command table, which
is random per process, so those are compared as sets of words.

Replies that Redis marks nondeterministic (COMMAND INFO tips) are compared
by kind only, or as multisets for nondeterministic_output_order. Lex ranges
over a skiplist whose scores differ are skipped: Redis's own answer then
depends on its skiplist's random levels.

Usage:
  scripts/fuzz-commands.py [--seed N] [--count N] [--only cmd,cmd] [--resp3]
                           [--wrap getkeys|eval] [--notify] [--tracking] [--watch]
                           [--config | --acl]
                           [--kvstore PATH] [--redis PATH]
Exit status 1 when anything differs. Found differences belong in
tests/differential/*.txt once fixed.
"""
import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# Commands not generated: they change the server itself, block, depend on
# time or randomness, or are not comparable between two servers.
EXCLUDE = set("""
shutdown debug monitor subscribe psubscribe ssubscribe unsubscribe punsubscribe sunsubscribe
sync psync replconf replicaof slaveof failover bgsave save bgrewriteaof client config info time
randomkey lastsave cluster acl migrate latency slowlog lolwut module memory object dump restore
restore-asking wait readonly readwrite asking hello auth reset quit spop pfdebug pfselftest
select swapdb script function eval evalsha eval_ro evalsha_ro fcall fcall_ro command
pttl pexpiretime ttl expiretime sentinel xinfo xpending
""".split())
BLOCKING = ("blpop", "brpop", "bzpopmin", "bzpopmax", "blmove", "brpoplpush", "blmpop",
            "bzmpop", "xread", "xreadgroup")
LEX = ("zrangebylex", "zrevrangebylex", "zlexcount", "zremrangebylex")
ENC_CONFIGS = ["list-max-listpack-size", "hash-max-listpack-entries", "hash-max-listpack-value",
               "set-max-intset-entries", "zset-max-listpack-entries", "zset-max-listpack-value",
               "list-compress-depth", "stream-node-max-entries", "stream-node-max-bytes"]

KEYS = ["k1", "k2", "k3", "k4", "{t}a", "{t}b"]
VALS = ["0", "1", "-1", "10", "3.5", "abc", "", "foo bar", "\x00\xff", "x" * 70, "+inf", "nan",
        "9223372036854775807", "-9223372036854775808", "18446744073709551616", " 1",
        "0x10", "a", "b", "c", "f1", "f2", "m1", "m2", "2", "5"]
INTS = ["0", "1", "-1", "2", "3", "5", "10", "100", "-100", "abc", "1.5",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", ""]
DBLS = ["0", "1", "1.5", "-2.5", "inf", "-inf", "+inf", "nan", "abc", "1e309", "(1", "2", "10"]
IDS = ["0", "0-1", "$", ">", "1-1", "2-0", "+", "-", "1-*", "abc", "3",
       "18446744073709551615-18446744073709551615"]
PATS = ["*", "k*", "k?", "[a-z]*", "\\", "*{t}*", "f*"]
CONFIG_VALUES = ["-1", "abc", "1k", "1.5", "100%", "", "yes", "no", "0", "9223372036854775808",
                 "1gb", "-1k", "1 2", "2147483648", "-2147483649", "5", "1K", "0x10", "1e3",
                 "-0", "+1", "01", "1kB", "101%", "%", "EVERYSEC", "18446744073709551616", "k"]
CONFIG_SKIP = set("""port tls-port bind unixsocket unixsocketperm dir dbfilename logfile appendonly
appenddirname appendfilename requirepass masterauth masteruser replicaof slaveof daemonize pidfile
aclfile syslog-enabled syslog-ident supervised cluster-config-file maxclients save
repl-diskless-sync-delay""".split())


class Conn:
    """A RESP client that keeps each reply's raw bytes."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def send(self, args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a.encode("latin-1") if isinstance(a, str) else a
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise ConnectionError("connection closed")
        self.buf += d

    def _line(self):
        while (i := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line, self.buf = self.buf[:i], self.buf[i + 2:]
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        d, self.buf = self.buf[:n], self.buf[n + 2:]
        return d

    def read(self):
        """(raw bytes, parsed) of one reply; parsed is (type byte, value)."""
        raw = []

        def rd():
            line = self._line()
            raw.append(line + b"\r\n")
            t, rest = line[:1], line[1:]
            if t in (b"$", b"=", b"!"):
                n = int(rest)
                if n < 0:
                    return (t, None)
                d = self._exact(n)
                raw.append(d + b"\r\n")
                return (t, d)
            if t in (b"*", b"~", b">", b"%", b"|"):
                n = int(rest)
                if n < 0:
                    return (t, None)
                return (t, [rd() for _ in range(n * 2 if t in (b"%", b"|") else n)])
            return (t, rest)

        parsed = rd()
        return b"".join(raw), parsed

    def call(self, *args):
        self.send(args)
        return self.read()


def plain(p):
    t, v = p
    if isinstance(v, list):
        return [plain(x) for x in v]
    if v is None:
        return None
    return int(v) if t == b":" else v.decode("latin-1")


def unordered(x):
    """A reply with every array, at every depth, taken as a multiset."""
    if isinstance(x, list):
        return sorted((unordered(y) for y in x), key=repr)
    return x


def same_kind(x, y):
    """Two replies of a command whose output is random: errors alike, or
    values of one shape."""
    err = lambda v: isinstance(v, str) and v.startswith(("ERR", "WRONGTYPE"))
    return err(x) == err(y) and type(x) is type(y)


def todict(flat):
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def parse_args(lst):
    out = []
    for a in lst:
        d = todict(a)
        if "arguments" in d:
            d["arguments"] = parse_args(d["arguments"])
        out.append(d)
    return out


def load_docs(conn):
    raw = plain(conn.call("COMMAND", "DOCS")[1])
    docs = {}
    for i in range(0, len(raw), 2):
        d = todict(raw[i + 1])
        d["arguments"] = parse_args(d.get("arguments", []))
        subs = d.get("subcommands", [])
        d["subcommands"] = {}
        for j in range(0, len(subs), 2):
            sd = todict(subs[j + 1])
            sd["arguments"] = parse_args(sd.get("arguments", []))
            d["subcommands"][subs[j]] = sd
        docs[raw[i]] = d
    tips = {}
    for info in plain(conn.call("COMMAND", "INFO")[1]):
        if info:
            tips[info[0]] = info[7]
            for sub in info[9] if len(info) > 9 else []:
                tips[sub[0]] = sub[7]
    return docs, tips


# What EVAL runs a generated command with (--wrap eval); its arguments are
# the script's ARGV.
SCRIPTED = ["return redis.pcall(unpack(ARGV))", "return redis.call(unpack(ARGV))",
            "redis.setresp(3) return redis.pcall(unpack(ARGV))",
            "local r = redis.pcall(unpack(ARGV)) "
            "return type(r) == 'table' and not r.err and cjson.encode(r) or r"]


class Generator:
    def __init__(self, docs, rng, only, exclude=EXCLUDE):
        self.docs, self.rng, self.only = docs, rng, only
        self.names = sorted(n for n in docs if n not in exclude and (only is None or n in only))

    def value(self, a, cmd):
        rng, t, name = self.rng, a.get("type"), a.get("name", "")
        if t == "key":
            return rng.choice(KEYS)
        if t == "pattern":
            return rng.choice(PATS)
        if t == "unix-time":
            return rng.choice(["1", "4102444800", "-1", "0", "abc", "4102444800000"])
        if "timeout" in name:
            return rng.choice(["0.01", "0.02", "-1", "abc"])
        if name == "milliseconds" and cmd in ("xread", "xreadgroup"):
            return rng.choice(["10", "-1", "abc"])
        if name in ("seconds", "milliseconds", "ttl"):
            return rng.choice(["100000", "0", "-5", "abc", "9223372036854775807", "1000000"])
        if cmd.startswith("x") and ("id" in name or name in ("start", "end", "threshold")):
            return rng.choice(IDS + INTS[:4])
        if t == "integer":
            return rng.choice(INTS)
        if t == "double":
            return rng.choice(DBLS)
        if name in ("group", "groupname"):
            return rng.choice(["g1", "g2"])
        if name in ("consumer", "consumername"):
            return rng.choice(["c1", "c2"])
        if name in ("min", "max") and cmd.startswith("z"):
            return rng.choice(DBLS + ["[a", "(b", "-", "+", "[", "(1.5"])
        if name in ("start", "stop", "end") or any(w in name for w in ("count", "index", "offset")):
            return rng.choice(INTS)
        return rng.choice(VALS)

    def args(self, specs, cmd, out):
        for a in specs:
            flags = a.get("flags", [])
            if "optional" in flags and self.rng.random() < 0.5:
                continue
            for _ in range(self.rng.choice([1, 1, 2, 3]) if "multiple" in flags else 1):
                self.one(a, cmd, out)

    def one(self, a, cmd, out):
        tok, t = a.get("token"), a.get("type")
        if tok is not None:
            # An XADD's "*" makes an ID from each server's clock.
            if tok == "*" and cmd == "xadd":
                tok = "1-*"
            out.append(tok if self.rng.random() < 0.9 else tok.lower())
        if t == "pure-token":
            return
        if t == "oneof":
            self.one(self.rng.choice(a["arguments"]), cmd, out)
        elif t == "block":
            self.args(a["arguments"], cmd, out)
        else:
            out.append(self.value(a, cmd))

    def command(self):
        rng = self.rng
        r = rng.random()
        if self.only is None and r < 0.01:
            return "config|set", ["CONFIG", "SET", rng.choice(ENC_CONFIGS),
                                  rng.choice(["0", "1", "2", "3", "-1", "-2", "128", "64"])]
        if self.only is None and r < 0.02:
            return "select", ["SELECT", rng.choice(["0", "1"])]
        if self.only is None and r < 0.025:
            return "swapdb", ["SWAPDB", "0", "1"]
        name = rng.choice(self.names)
        d = self.docs[name]
        if d["subcommands"]:
            sub = rng.choice(sorted(d["subcommands"]))
            out = sub.split("|")
            self.args(d["subcommands"][sub]["arguments"], name, out)
            return sub, out
        out = [name]
        self.args(d["arguments"], name, out)
        if name not in BLOCKING:
            r = rng.random()
            if r < 0.06 and len(out) > 1:
                del out[rng.randrange(1, len(out))]
            elif r < 0.10:
                out.insert(rng.randrange(1, len(out) + 1), rng.choice(VALS + INTS))
            elif r < 0.13 and len(out) > 1:
                out[rng.randrange(1, len(out))] = rng.choice(VALS + INTS)
        return name, out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary, workdir):
    port = free_port()
    os.makedirs(workdir)
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--enable-debug-command", "yes", "--dir", workdir, "--logfile", os.path.join(workdir, "log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            c = Conn(port)
            if c.call("PING")[0] == b"+PONG\r\n":
                return proc, c
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{binary} did not start")


def same_data(R, K):
    if R.call("DEBUG", "DIGEST")[0] == K.call("DEBUG", "DIGEST")[0]:
        return True
    time.sleep(0.2)  # a TTL may have run out on one server a moment earlier
    return R.call("DEBUG", "DIGEST")[0] == K.call("DEBUG", "DIGEST")[0]


def show_keys(conn, cmd, selected):
    """What the keys hold before `cmd` (on the redis-server side)."""
    print(f"before {cmd!r} (database {selected} selected):")
    for db in ("0", "1"):
        conn.call("SELECT", db)
        for k in KEYS:
            t = plain(conn.call("TYPE", k)[1])
            read = {"string": ["GET", k], "list": ["LRANGE", k, "0", "-1"], "set": ["SMEMBERS", k],
                    "zset": ["ZRANGE", k, "0", "-1", "WITHSCORES"], "hash": ["HGETALL", k],
                    "stream": ["XRANGE", k, "-", "+"]}.get(t)
            if read:
                enc = plain(conn.call("OBJECT", "ENCODING", k)[1])
                print(f"  db{db} {k} {t} {enc}: {plain(conn.call(*read)[1])!r}")
    conn.call("SELECT", selected)


class Notifications:
    """A subscriber to every keyspace notification of one server."""

    def __init__(self, conn):
        conn.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
        self.sub = Conn(conn.s.getpeername()[1])
        self.sub.call("PSUBSCRIBE", "__key*__:*")

    def received(self):
        """What was published up to now: a PING's reply comes after it."""
        self.sub.send(["PING"])
        got = []
        while True:
            msg = plain(self.sub.read()[1])
            if msg[:1] == ["pong"]:
                return got
            got.append(msg)


class Tracker:
    """A RESP3 client tracking every key in broadcast mode: the
    invalidations each command sends it (Redis's signalModifiedKey)."""

    def __init__(self, conn):
        self.conn = Conn(conn.s.getpeername()[1])
        self.conn.call("HELLO", "3")
        self.conn.call("CLIENT", "TRACKING", "ON", "BCAST")

    def received(self):
        self.conn.send(["PING"])
        got = []
        while True:
            raw, p = self.conn.read()
            if raw == b"+PONG\r\n":
                return got
            got.append(plain(p))


class Watcher:
    """A second client that WATCHes a key of database 0 before each command
    and runs an empty transaction after it: EXEC fails when the command
    touched the key (Redis's signalModifiedKey)."""

    def __init__(self, conn):
        self.conn = Conn(conn.s.getpeername()[1])

    def watch(self, key):
        self.conn.call("WATCH", key)

    def exec(self):
        self.conn.call("MULTI")
        self.conn.call("PING")
        return self.conn.call("EXEC")[0]


def wrap(rng, how, cmd, tips):
    if how == "getkeys":
        return ["COMMAND", rng.choice(["GETKEYS", "GETKEYSANDFLAGS"])] + cmd
    if how == "eval":
        # A reply in a random order stays a reply, to be compared as a set.
        scripts = SCRIPTED[:3] if any(t.startswith("nondet") for t in tips) else SCRIPTED
        return ["EVAL", rng.choice(scripts), "0"] + cmd
    return cmd


def fuzz_commands(R, K, args):
    rng = random.Random(args.seed)
    docs, tips = load_docs(R)
    only = set(args.only.split(",")) if args.only else None
    # COMMAND GETKEYS runs nothing: every command can be asked about.
    gen = Generator(docs, rng, only, set() if args.wrap == "getkeys" else EXCLUDE)
    if args.resp3:
        R.call("HELLO", "3")
        K.call("HELLO", "3")
    if args.notify or args.tracking or args.watch:
        # What the active expiry cycle deletes, and when, is up to the clock.
        R.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        K.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    notify = (Notifications(R), Notifications(K)) if args.notify else None
    watch = (Watcher(R), Watcher(K)) if args.watch else None
    track = (Tracker(R), Tracker(K)) if args.tracking else None
    seen, differ, history, selected = {}, 0, [], "0"
    # The commands queued in the open transaction (None outside one), so
    # that EXEC's elements are compared as each command's reply would be.
    queued = None

    def note(kind, text):
        """Count a difference; print the first two of each kind."""
        nonlocal differ
        differ += 1
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= 2:
            print(text)

    for i in range(args.count):
        name, inner = gen.command()
        t = tips.get(name, [])
        cmd = wrap(rng, args.wrap, inner, t)
        if i == args.show_at:
            show_keys(R, cmd, selected)
        history.append(cmd)
        if watch:
            watched = rng.choice(KEYS)
            watch[0].watch(watched)
            watch[1].watch(watched)
        R.send(cmd)
        K.send(cmd)
        (rr, rp), (kr, kp) = R.read(), K.read()
        same = rr == kr
        # What a random pop or pick touches is random on each server.
        listened = same and "nondeterministic_output" not in t
        if watch:
            re, ke = watch[0].exec(), watch[1].exec()
            if listened and re != ke:
                note(("watch", name), f"#{i} {cmd!r} with {watched} watched in db0 (db{selected} "
                     f"selected):\n  redis EXEC:   {re!r}\n  kvstore EXEC: {ke!r}")
        if same and name == "select" and not args.wrap and rr == b"+OK\r\n":
            selected = cmd[1]
        for what, pair in (("invalidated", track), ("notified", notify)):
            if same and pair:
                rg, kg = pair[0].received(), pair[1].received()
                if listened and rg != kg:
                    note((what, name), f"#{i} {cmd!r} {what}\n  redis:   {rg!r}\n  kvstore: {kg!r}")
        if not same and "nondeterministic_output" in t:
            same = rr.startswith(b"-") == kr.startswith(b"-")
        elif not same and not rr.startswith(b"-") and not kr.startswith(b"-"):
            if "nondeterministic_output_order" in t and isinstance(rp[1], list):
                same = sorted(map(repr, plain(rp))) == sorted(map(repr, plain(kp)))
        # EXEC: a queued KEYS, SMEMBERS, … answers in hash order on each
        # server; its element may differ in order only (each element is
        # compared as a multiset when it is an array; the EXEC's own order
        # still counts).
        # A queued command whose output is random (SPOP, SRANDMEMBER, SCAN
        # with a cursor of its own, …) is compared by kind only, and arrays
        # at any depth as multisets (SCAN's key list inside its reply).
        if not same and name == "exec" and isinstance(rp[1], list) and isinstance(kp[1], list):
            ra, ka = plain(rp), plain(kp)
            names = queued if queued is not None and len(queued) == len(ra) else [None] * len(ra)
            same = len(ra) == len(ka) and all(
                x == y or unordered(x) == unordered(y)
                or ("nondeterministic_output" in tips.get(q, []) and same_kind(x, y))
                for x, y, q in zip(ra, ka, names))
        if rr == kr:
            if name == "multi" and rr.startswith(b"+OK"):
                queued = []
            elif queued is not None and rr.startswith(b"+QUEUED"):
                queued.append(name)
            elif name in ("exec", "discard", "reset"):
                queued = None
        elif name in ("exec", "discard", "reset"):
            queued = None
        # SORT of a set: elements that compare equal (BY a missing key)
        # come in the order of Redis's set table, random per process.
        if not same and name in ("sort", "sort_ro") and not rr.startswith(b"-") \
                and R.call("TYPE", inner[1])[0] == b"+set\r\n":
            same = sorted(map(repr, plain(rp))) == sorted(map(repr, plain(kp)))
        lexish = name in LEX or (name.startswith("z") and "BYLEX" in map(str.upper, inner))
        if not same and lexish and R.call("OBJECT", "ENCODING", inner[1])[0].endswith(b"skiplist\r\n"):
            same = True
        if not same:
            kind = (name, rr[:40] if rr.startswith(b"-") else b"", kr[:40] if kr.startswith(b"-") else b"")
            at = next((j for j, (x, y) in enumerate(zip(rr, kr)) if x != y), min(len(rr), len(kr)))
            at = max(0, at - 100) if at > 300 else 0
            note(kind, f"#{i} {cmd!r}\n  redis:   {rr[at:at + 300]!r}\n  kvstore: {kr[at:at + 300]!r}")
            R.call("FLUSHALL")
            K.call("FLUSHALL")
            for listener in (notify or ()) + (track or ()):
                listener.received()
            continue
        if i % args.check_every == 0:
            for k in KEYS:
                a, b = R.call("OBJECT", "ENCODING", k)[0], K.call("OBJECT", "ENCODING", k)[0]
                if a != b:
                    differ += 1
                    print(f"#{i} encoding of {k}: redis {a!r} kvstore {b!r}")
            if not same_data(R, K):
                differ += 1
                print(f"#{i} the datasets differ after:")
                for h in history[-args.check_every:]:
                    print("   ", h)
                R.call("FLUSHALL")
                K.call("FLUSHALL")
            history.clear()
        if i % 300 == 299:
            R.call("FLUSHALL")
            K.call("FLUSHALL")
            for listener in (notify or ()) + (track or ()):
                listener.received()
    print(f"seed {args.seed}: {args.count} commands, {differ} differ ({len(seen)} kinds)")
    return differ


# --acl: the parts of random ACL rules.
ACL_COMMANDS = ["get", "set", "GET", "client", "client|id", "client|kill", "config|get", "acl",
                "acl|whoami", "debug", "select", "ping", "xadd", "hset", "flushall", "info", "eval",
                "readonly", "nosuchcmd", "set|x", "get|x", "hello", "auth", "keys", "config", "sort",
                "lmove", "zrangestore", "bitop", "select|1", "config|get|x"]
ACL_CATEGORIES = ["read", "write", "keyspace", "dangerous", "admin", "string", "list", "hash", "all",
                  "pubsub", "scripting", "slow", "fast", "nosuchcat", "connection", "blocking", "geo",
                  "stream", "bitmap", ""]
ACL_PATTERNS = ["*", "k*", "foo", "{t}*", "a?c", "", "x y", "k1"]
SHA_OF_PASSWORD = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
ACL_PROBES = ["get k1", "set k1 v", "set {t}a v", "getset foo v", "lmove k1 foo left right",
              "client id", "client kill 1.2.3.4:5", "config get maxmemory", "select 1", "ping",
              "publish foo m", "subscribe k1", "sort k1 by foo get k*", "eval x 1 k1",
              "xadd k1 * a b", "hset a?c f v", "keys *", "bitop and k1 foo", "acl whoami",
              "nosuchcmd a", "get", "zrangestore foo k1 0 1", "copy k1 foo", "migrate h 1 k1 0 1",
              "spublish foo m", "pfcount k1 foo", "rename k1 foo", "evalsha x 2 k1 foo", "set"]


def acl_rule(rng, depth=0):
    c = rng.choice
    kinds = [
        lambda: c(["on", "off", "nopass", "resetpass", "allkeys", "allchannels", "resetkeys",
                   "resetchannels", "allcommands", "nocommands", "reset", "clearselectors", "ON"]),
        lambda: ">" + c(["p1", "p2", "", "x y"]),
        lambda: "<" + c(["p1", "p2", "nosuch"]),
        lambda: "#" + c(["a" * 64, SHA_OF_PASSWORD, "abc", "G" * 64]),
        lambda: "!" + c(["a" * 64, SHA_OF_PASSWORD, "xyz"]),
        lambda: "~" + c(ACL_PATTERNS),
        lambda: "%" + c(["R", "W", "RW", "WR", "X", "", "r"]) + "~" + c(ACL_PATTERNS),
        lambda: "&" + c(ACL_PATTERNS),
        lambda: c(["+", "-"]) + c(ACL_COMMANDS),
        lambda: c(["+", "-"]) + "@" + c(ACL_CATEGORIES),
        lambda: "(" + " ".join(acl_rule(rng, depth + 1) for _ in range(rng.randint(0, 3))) + ")"
        if depth < 2 else "()",
        lambda: c(["", "+", "-", "@", "~", "%", "(", ")", "nosuchrule"]),
    ]
    return c(kinds)()


def words(raw):
    return sorted(raw.replace(b"\r\n", b" ").replace(b"(", b" ").replace(b")", b" ").split())


def fuzz_acl(R, K, args):
    rng = random.Random(args.seed)
    users = ["u1", "u2", "u3"]
    differ = 0
    for i in range(args.count):
        r, u = rng.random(), rng.choice(users)
        if r < 0.45:
            cmd = ["ACL", "SETUSER", u] + [acl_rule(rng) for _ in range(rng.randint(0, 5))]
        elif r < 0.6:
            cmd = ["ACL", "GETUSER", u]
        elif r < 0.65:
            cmd = ["ACL", "LIST"]
        elif r < 0.68:
            cmd = ["ACL", "DELUSER", u]
        elif r < 0.72:
            cmd = ["ACL", "USERS"]
        else:
            cmd = ["ACL", "DRYRUN", u] + rng.choice(ACL_PROBES).split()
        a, b = R.call(*cmd)[0], K.call(*cmd)[0]
        if a != b and cmd[1] in ("GETUSER", "LIST") and words(a) == words(b):
            continue
        if a != b:
            differ += 1
            if differ <= 10:
                print(f"#{i} {cmd!r}\n  redis:   {a[:400]!r}\n  kvstore: {b[:400]!r}")
            for v in users:
                R.call("ACL", "DELUSER", v)
                K.call("ACL", "DELUSER", v)
    print(f"acl seed {args.seed}: {args.count} commands, {differ} differ")
    return differ


def fuzz_config(R, K):
    def config(c):
        f = plain(c.call("CONFIG", "GET", "*")[1])
        return {f[i]: f[i + 1] for i in range(0, len(f), 2)}

    rc, kc = config(R), config(K)
    differ = 0
    for name in sorted(rc):
        if name in CONFIG_SKIP:
            continue
        if name not in kc:
            differ += 1
            print(f"{name}: unknown to kvstore")
            continue
        if rc[name] != kc[name]:
            differ += 1
            print(f"{name}: default {rc[name]!r} in redis, {kc[name]!r} in kvstore")
        for v in CONFIG_VALUES:
            a, b = R.call("CONFIG", "SET", name, v)[0], K.call("CONFIG", "SET", name, v)[0]
            ga, gb = R.call("CONFIG", "GET", name)[0], K.call("CONFIG", "GET", name)[0]
            if a != b or ga != gb:
                differ += 1
                print(f"CONFIG SET {name} {v!r}\n  redis:   {a!r} {ga!r}\n  kvstore: {b!r} {gb!r}")
            R.call("CONFIG", "SET", name, rc[name])
            K.call("CONFIG", "SET", name, kc[name])
    print(f"config: {len(rc)} options, {differ} differ")
    return differ


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 32))
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--only", help="comma-separated command names")
    ap.add_argument("--resp3", action="store_true")
    ap.add_argument("--config", action="store_true", help="fuzz CONFIG SET instead")
    ap.add_argument("--acl", action="store_true", help="fuzz ACL rules instead")
    ap.add_argument("--wrap", choices=["getkeys", "eval"],
                    help="send each command inside COMMAND GETKEYS[ANDFLAGS] or EVAL")
    ap.add_argument("--notify", action="store_true",
                    help="compare the keyspace notifications of every command too")
    ap.add_argument("--tracking", action="store_true",
                    help="compare the invalidations a broadcast-tracking client gets too")
    ap.add_argument("--watch", action="store_true",
                    help="compare whether each command breaks another client's WATCH")
    ap.add_argument("--check-every", type=int, default=25)
    ap.add_argument("--show-at", type=int, default=-1,
                    help="print every key's contents before command N (then go on)")
    ap.add_argument("--kvstore", default="target/release/kvstore")
    ap.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fuzz-commands-")
    procs = []
    try:
        rproc, R = start(args.redis, os.path.join(work, "redis"))
        procs.append(rproc)
        kproc, K = start(args.kvstore, os.path.join(work, "kvstore"))
        procs.append(kproc)
        if args.config:
            differ = fuzz_config(R, K)
        elif args.acl:
            differ = fuzz_acl(R, K, args)
        else:
            differ = fuzz_commands(R, K, args)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
