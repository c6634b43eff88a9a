#!/usr/bin/env bash
# Side-by-side benchmark of a large sorted set (a leaderboard), kvstore
# against redis-server, with redis-benchmark (50 clients, pipeline 1):
#   - one set of MEMBERS members (user:<12 digits>, scores spread over
#     0..1M) and one of MEMBERS members with equal scores (lex:<12 digits>),
#     loaded with ZADD of 1,000 members through redis-cli --pipe;
#   - ZRANK and ZREVRANK of random members, ZRANGE of 10 members at the
#     middle rank, ZRANGEBYSCORE … LIMIT 0 10 from the middle score, ZCOUNT
#     of 90% of the scores, ZRANGEBYLEX … LIMIT 0 10 from the middle member
#     and ZLEXCOUNT of 80% of the members: requests/s and the server's CPU
#     µs per call;
#   - ZADD updating random members' scores (the order moves): the same;
#   - the server's RSS and used_memory after the load.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-zset.sh  (MEMBERS=1000000 REQUESTS=200000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
MEMBERS=${MEMBERS:-1000000}
REQUESTS=${REQUESTS:-200000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)

# The same ZADDs for both servers, in RESP.
load="$work/load.resp"
python3 - "$MEMBERS" >"$load" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_helper import resp
n = int(sys.argv[1])
def cmd(args):
    sys.stdout.buffer.write(resp(*args))
for key, score in (("lb", lambda i: str(i * 7919 % 1000003)), ("lex", lambda i: "0")):
    for start in range(0, n, 1000):
        args = ["ZADD", key]
        for i in range(start, min(n, start + 1000)):
            args += [score(i), "%s:%012d" % ("user" if key == "lb" else "lex", i)]
        cmd(args)
PY

mid=$(printf '%012d' $((MEMBERS / 2)))
low=$(printf '%012d' $((MEMBERS / 10)))
high=$(printf '%012d' $((MEMBERS * 9 / 10)))

run_side() { # SIDE
    local side=$1 dir="$work/$1"
    start_fresh "$side" "$dir"
    redis-cli -p "$port" --pipe <"$load" >/dev/null
    [[ $(redis-cli -p "$port" zcard lb) == "$MEMBERS" ]] || { echo "$side: load failed" >&2; exit 1; }
    record "$side" rss_mb "$(echo "$(info_field "$port" memory used_memory_rss) / 1048576" | bc -l)"
    record "$side" used_mb "$(echo "$(info_field "$port" memory used_memory) / 1048576" | bc -l)"
    measure "$side" zrank "$REQUESTS" 1 -r "$MEMBERS" zrank lb user:__rand_int__
    measure "$side" zrevrank "$REQUESTS" 1 -r "$MEMBERS" zrevrank lb user:__rand_int__
    measure "$side" zrange "$REQUESTS" 1 zrange lb $((MEMBERS / 2)) $((MEMBERS / 2 + 9))
    measure "$side" zrangebyscore "$REQUESTS" 1 zrangebyscore lb 500000 +inf LIMIT 0 10
    measure "$side" zcount "$REQUESTS" 1 zcount lb 50000 950000
    measure "$side" zrangebylex "$REQUESTS" 1 zrangebylex lex "[lex:$mid" + LIMIT 0 10
    measure "$side" zlexcount "$REQUESTS" 1 zlexcount lex "[lex:$low" "[lex:$high"
    measure "$side" zadd "$REQUESTS" 1 -r "$MEMBERS" zadd lb __rand_int__ user:__rand_int__
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Sorted set of $MEMBERS members, 50 clients, P1, median of $ROUNDS rounds [min–max]" \
    "RSS after load MB|rss_mb|.1f" \
    "used_memory after load MB|used_mb|.1f" \
    "ZRANK requests/s|zrank_rps|,.0f" \
    "ZRANK server CPU µs/call|zrank_cpu|.2f" \
    "ZREVRANK requests/s|zrevrank_rps|,.0f" \
    "ZREVRANK server CPU µs/call|zrevrank_cpu|.2f" \
    "ZRANGE 10 at the middle rank requests/s|zrange_rps|,.0f" \
    "ZRANGE 10 at the middle rank server CPU µs/call|zrange_cpu|.2f" \
    "ZRANGEBYSCORE LIMIT 0 10 requests/s|zrangebyscore_rps|,.0f" \
    "ZRANGEBYSCORE LIMIT 0 10 server CPU µs/call|zrangebyscore_cpu|.2f" \
    "ZCOUNT of 90% requests/s|zcount_rps|,.0f" \
    "ZCOUNT of 90% server CPU µs/call|zcount_cpu|.2f" \
    "ZRANGEBYLEX LIMIT 0 10 requests/s|zrangebylex_rps|,.0f" \
    "ZRANGEBYLEX LIMIT 0 10 server CPU µs/call|zrangebylex_cpu|.2f" \
    "ZLEXCOUNT of 80% requests/s|zlexcount_rps|,.0f" \
    "ZLEXCOUNT of 80% server CPU µs/call|zlexcount_cpu|.2f" \
    "ZADD (score updates) requests/s|zadd_rps|,.0f" \
    "ZADD (score updates) server CPU µs/call|zadd_cpu|.2f"
