#!/usr/bin/env bash
# kvstore's two networking engines (io-engine io_uring and epoll) beside
# redis-server, with redis-benchmark (50 clients unless BENCH_CLIENTS):
#   - SET and GET of random keys (-r 1000000) at pipelines of 1 and 16:
#     requests/s and the server's CPU µs per request (user+sys from /proc,
#     every thread of the process, the kernel's work for its sockets
#     included);
#   - SET of LARGE_SIZE-byte values (100 KB: arguments read into buffers
#     of their own) at pipeline 1 over 100 keys;
#   - GET at pipelines of 16 and 1 of random keys from a keyspace of BIG_KEYS keys
#     (10M: far bigger than the caches), all present (filled by a script
#     with key:%012d, the names redis-benchmark's __rand_int__ makes), after
#     an unmeasured run of the same length (the fill leaves a table resize
#     that both servers finish a bucket per lookup); BIG_KEYS=0 leaves it out.
# ROUNDS rounds (default 3), interleaved, the side that goes first
# rotating; the table shows medians with the min–max spread, and each
# engine's ratio to Redis.
#
# Usage: scripts/bench-engines.sh  (P1_REQUESTS=200000 P16_REQUESTS=3000000
#        LARGE_SIZE=100000 LARGE_REQUESTS=40000 BIG_KEYS=10000000
#        BIG_REQUESTS=3000000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
P1_REQUESTS=${P1_REQUESTS:-200000}
P16_REQUESTS=${P16_REQUESTS:-3000000}
LARGE_SIZE=${LARGE_SIZE:-100000}
LARGE_REQUESTS=${LARGE_REQUESTS:-40000}
BIG_KEYS=${BIG_KEYS:-10000000}
BIG_REQUESTS=${BIG_REQUESTS:-3000000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SIDES=(io_uring epoll redis)

run_side() { # SIDE
    local side=$1 dir="$work/$1" p t
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    case $side in
        redis) SERVER_ARGS=(--appendonly no); start redis "$dir" "$port" ;;
        *) SERVER_ARGS=(--appendonly no --io-engine "$side"); start kvstore "$dir" "$port" ;;
    esac
    wait_ping "$port"
    for t in set get; do
        measure "$side" "${t}_p1" "$P1_REQUESTS" 1 -r 1000000 -t "$t"
        measure "$side" "${t}_p16" "$P16_REQUESTS" 16 -r 1000000 -t "$t"
    done
    measure "$side" large_set_p1 "$LARGE_REQUESTS" 1 -r 100 -d "$LARGE_SIZE" -t set
    redis-cli -p "$port" flushall >/dev/null
    if ((BIG_KEYS > 0)); then
        big_keyspace "$side"
    fi
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

big_keyspace() { # SIDE
    local side=$1
    redis-cli -p "$port" eval \
        "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('set', string.format('key:%012d', i), 'xxx') end" \
        0 "$BIG_KEYS" >/dev/null
    [[ $(redis-cli -p "$port" dbsize) == "$BIG_KEYS" ]] || { echo "$side: the keyspace was not filled" >&2; exit 1; }
    # Filling it started a table resize; both servers finish it a bucket
    # per lookup, so a first, unmeasured run lets it end before the measure.
    bench_rps "$port" "$BIG_REQUESTS" 16 -r "$BIG_KEYS" -t get >/dev/null
    measure "$side" big_get_p16 "$BIG_REQUESTS" 16 -r "$BIG_KEYS" -t get
    measure "$side" big_get_p1 "$P1_REQUESTS" 1 -r "$BIG_KEYS" -t get
}

run_rotating "${SIDES[@]}"

big_rows=()
if ((BIG_KEYS > 0)); then
    big_rows=(
        "GET P16, $BIG_KEYS keys, requests/s|big_get_p16_rps|,.0f"
        "GET P16, $BIG_KEYS keys, server CPU µs/request|big_get_p16_cpu|.3f"
        "GET P1, $BIG_KEYS keys, requests/s|big_get_p1_rps|,.0f"
        "GET P1, $BIG_KEYS keys, server CPU µs/request|big_get_p1_cpu|.3f"
    )
fi
python3 "$HELPER" sides-table "$results" \
    "Networking engines, ${BENCH_CLIENTS:-50} clients, median of $ROUNDS rounds [min–max]" \
    "io_uring,epoll,redis" \
    "${SET_GET_ROWS[@]}" \
    "SET P1 of $LARGE_SIZE-byte values, requests/s|large_set_p1_rps|,.0f" \
    "SET P1 of $LARGE_SIZE-byte values, server CPU µs/request|large_set_p1_cpu|.3f" \
    "${big_rows[@]}"
