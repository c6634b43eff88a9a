#!/usr/bin/env bash
# Side-by-side benchmark of random picks with a count from large
# collections, kvstore against redis-server, with redis-benchmark (50
# clients, pipeline 1):
#   - a set, a hash and a sorted set of MEMBERS members each (m:<12 digits>),
#     loaded 1,000 members a command through redis-cli --pipe;
#   - SRANDMEMBER, HRANDFIELD … WITHVALUES and ZRANDMEMBER … WITHSCORES with
#     a count of 10 (distinct members) and of -10 (repeats allowed), and
#     SRANDMEMBER of 1,000: requests/s and the server's CPU µs per call.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-random.sh  (MEMBERS=1000000 REQUESTS=100000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBERS=${MEMBERS:-1000000}
REQUESTS=${REQUESTS:-100000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)

# The same SADDs, HSETs and ZADDs for both servers, in RESP.
load="$work/load.resp"
python3 - "$MEMBERS" >"$load" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_helper import resp
n = int(sys.argv[1])
def cmd(args):
    sys.stdout.buffer.write(resp(*args))
for start in range(0, n, 1000):
    members = ["m:%012d" % i for i in range(start, min(n, start + 1000))]
    cmd(["SADD", "s"] + members)
    cmd(["HSET", "h"] + [x for m in members for x in (m, "v")])
    cmd(["ZADD", "z"] + [x for i, m in enumerate(members) for x in (str(start + i), m)])
PY

run_side() { # SIDE
    local side=$1 dir="$work/$1"
    start_fresh "$side" "$dir"
    redis-cli -p "$port" --pipe <"$load" >/dev/null
    [[ $(redis-cli -p "$port" scard s) == "$MEMBERS" ]] || { echo "$side: load failed" >&2; exit 1; }
    measure "$side" srand10 "$REQUESTS" 1 srandmember s 10
    measure "$side" srandneg10 "$REQUESTS" 1 srandmember s -10
    measure "$side" srand1000 $((REQUESTS / 10)) 1 srandmember s 1000
    measure "$side" hrand10 "$REQUESTS" 1 hrandfield h 10 withvalues
    measure "$side" hrandneg10 "$REQUESTS" 1 hrandfield h -10 withvalues
    measure "$side" zrand10 "$REQUESTS" 1 zrandmember z 10 withscores
    measure "$side" zrandneg10 "$REQUESTS" 1 zrandmember z -10 withscores
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Random picks from collections of $MEMBERS members, 50 clients, P1, median of $ROUNDS rounds [min–max]" \
    "SRANDMEMBER 10 requests/s|srand10_rps|,.0f" \
    "SRANDMEMBER 10 server CPU µs/call|srand10_cpu|.2f" \
    "SRANDMEMBER -10 requests/s|srandneg10_rps|,.0f" \
    "SRANDMEMBER -10 server CPU µs/call|srandneg10_cpu|.2f" \
    "SRANDMEMBER 1000 requests/s|srand1000_rps|,.0f" \
    "SRANDMEMBER 1000 server CPU µs/call|srand1000_cpu|.2f" \
    "HRANDFIELD 10 WITHVALUES requests/s|hrand10_rps|,.0f" \
    "HRANDFIELD 10 WITHVALUES server CPU µs/call|hrand10_cpu|.2f" \
    "HRANDFIELD -10 WITHVALUES requests/s|hrandneg10_rps|,.0f" \
    "HRANDFIELD -10 WITHVALUES server CPU µs/call|hrandneg10_cpu|.2f" \
    "ZRANDMEMBER 10 WITHSCORES requests/s|zrand10_rps|,.0f" \
    "ZRANDMEMBER 10 WITHSCORES server CPU µs/call|zrand10_cpu|.2f" \
    "ZRANDMEMBER -10 WITHSCORES requests/s|zrandneg10_rps|,.0f" \
    "ZRANDMEMBER -10 WITHSCORES server CPU µs/call|zrandneg10_cpu|.2f"
