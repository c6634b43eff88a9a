#!/usr/bin/env python3
"""Write RESP command streams for the data-type memory benchmark.

usage: gen_types.py KIND FILE     prints "<commands> <keys>" on stdout

KIND:
  hashes      100,000 hashes `user:%06d`, 10 small fields each
  list        one list of 1,000,000 small items
  intset      one set of 1,000,000 integers
  strset      one set of 1,000,000 short strings
  zset        one sorted set of 1,000,000 members
"""
import sys

BATCH = 1000


def cmd(parts):
    out = [b"*%d\r\n" % len(parts)]
    for p in parts:
        if isinstance(p, str):
            p = p.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(p), p))
    return b"".join(out)


def batches(n, make, prefix):
    count = 0
    for start in range(0, n, BATCH):
        args = list(prefix)
        for i in range(start, min(n, start + BATCH)):
            args.extend(make(i))
        yield cmd(args)
        count += 1


def main():
    kind, path = sys.argv[1], sys.argv[2]
    commands = 0
    keys = 1
    with open(path, "wb") as f:
        if kind == "hashes":
            keys = 100_000
            for k in range(keys):
                args = ["HSET", "user:%06d" % k]
                for i in range(10):
                    args += ["field%d" % i, "value%d" % (k * 10 + i)]
                f.write(cmd(args))
                commands += 1
        else:
            n = 1_000_000
            if kind == "list":
                gen = batches(n, lambda i: ["item:%07d" % i], ["RPUSH", "biglist"])
            elif kind == "intset":
                gen = batches(n, lambda i: [str(i * 7)], ["SADD", "ints"])
            elif kind == "strset":
                gen = batches(n, lambda i: ["member:%07d" % i], ["SADD", "strs"])
            elif kind == "zset":
                gen = batches(n, lambda i: [str(i % 100000), "member:%07d" % i], ["ZADD", "ranking"])
            else:
                sys.exit("unknown kind " + kind)
            for c in gen:
                f.write(c)
                commands += 1
    print(commands, keys)


if __name__ == "__main__":
    main()
