#!/usr/bin/env bash
# Side-by-side scripting benchmark: EVALSHA of a 3-command script (INCR,
# SET, GET on two keys drawn from KEYSPACE) with redis-benchmark, 50
# clients, pipelines of 1 and 16, kvstore against redis-server: requests
# per second and the server's CPU µs per call (user+sys from /proc).
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-scripting.sh   (REQUESTS=500000 ROUNDS=3 KEYSPACE=100000)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-500000}
ROUNDS=${ROUNDS:-3}
KEYSPACE=${KEYSPACE:-100000}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)
SCRIPT="redis.call('incr', KEYS[1]); redis.call('set', KEYS[2], ARGV[1]); return redis.call('get', KEYS[2])"


run_side() { # SIDE
    local side=$1 dir="$work/$1" port sha c0 c1 p rps
    start_fresh "$side" "$dir"
    sha=$(redis-cli -p "$port" script load "$SCRIPT")
    for p in 1 16; do
        c0=$(cpu_ticks "$pid")
        rps=$(redis-benchmark -p "$port" -c 50 -P "$p" -n "$REQUESTS" -r "$KEYSPACE" --csv \
            evalsha "$sha" 2 "c:__rand_int__" "s:__rand_int__" value 2>/dev/null |
            awk -F, 'NR == 2 { gsub(/"/, "", $2); print $2 }')
        c1=$(cpu_ticks "$pid")
        record "$side" "rps_p$p" "$rps"
        record "$side" "cpu_us_p$p" "$(echo "($c1 - $c0) * 10000 / $REQUESTS" | bc -l)"
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "EVALSHA of a 3-command script, 50 clients, $REQUESTS calls, median of $ROUNDS rounds [min–max]" \
    "EVALSHA P1 requests/s|rps_p1|,.0f" \
    "EVALSHA P1 server CPU µs/call|cpu_us_p1|.3f" \
    "EVALSHA P16 requests/s|rps_p16|,.0f" \
    "EVALSHA P16 server CPU µs/call|cpu_us_p16|.3f"
