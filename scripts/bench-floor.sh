#!/usr/bin/env bash
# The floor under CPU per request: `examples/floor.rs` (a responder that
# frames RESP and answers with fixed replies: no keyspace, no commands)
# with each networking engine, beside kvstore's two engines and
# redis-server, with redis-benchmark (50 clients unless BENCH_CLIENTS):
#   - SET and GET of random keys (-r 1000000) at pipelines of 1 and 16:
#     requests/s and the server's CPU µs per request (user+sys from /proc,
#     every thread, the kernel's work for its sockets included);
#   - SET at pipelines of 1 and 16 with the AOF under `appendfsync
#     everysec` (the floor appends each turn's SET bytes with one write(2)
#     and fdatasyncs once a second from a thread), the requests/s also as
#     a share of the same round's AOF-off run.
# What the floor spends is the kernel's part plus framing: no server on the
# same system calls can spend less, so its ratio to Redis bounds every
# goal stated as a ratio to Redis's CPU per request.
# ROUNDS rounds (default 5), interleaved, the side that goes first rotating;
# medians with the min–max spread, and each side's ratio to Redis.
#
# Usage: scripts/bench-floor.sh  (P1_REQUESTS=200000 P16_REQUESTS=2000000
#        ROUNDS=5; FLOOR_BIN and KVSTORE_BIN to use builds already made;
#        RESULTS_OUT=FILE keeps every round's figures, SIDE<TAB>NAME<TAB>VALUE)
set -euo pipefail
cd "$(dirname "$0")/.."
P1_REQUESTS=${P1_REQUESTS:-200000}
P16_REQUESTS=${P16_REQUESTS:-2000000}
ROUNDS=${ROUNDS:-5}
if [[ -n ${FLOOR_BIN:-} ]]; then
    FLOOR=$FLOOR_BIN
else
    cargo build --release --example floor >&2
    FLOOR=target/release/examples/floor
fi
source scripts/bench-common.sh

SIDES=(floor_io_uring floor_epoll io_uring epoll redis)

# start_side SIDE DIR AOF(yes|no): the side's server on a free port, once
# it answers PING.
start_side() {
    local side=$1 dir=$2 aof=$3
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    case $side in
        floor_*)
            local args=(--port "$port" --engine "${side#floor_}")
            [[ $aof == yes ]] && args+=(--aof "$dir/appendonly.aof")
            "$FLOOR" "${args[@]}" >"$dir/log" 2>&1 </dev/null &
            pid=$!
            pids+=("$pid")
            ;;
        redis)
            SERVER_ARGS=(--appendonly "$aof" --appendfsync everysec)
            start redis "$dir" "$port"
            ;;
        *)
            SERVER_ARGS=(--appendonly "$aof" --appendfsync everysec --io-engine "$side")
            start kvstore "$dir" "$port"
            ;;
    esac
    wait_ping "$port"
}

stop_side() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

run_side() { # SIDE
    local side=$1 t
    start_side "$side" "$work/$side" no
    for t in set get; do
        measure "$side" "${t}_p1" "$P1_REQUESTS" 1 -r 1000000 -t "$t"
        measure "$side" "${t}_p16" "$P16_REQUESTS" 16 -r 1000000 -t "$t"
    done
    stop_side
    start_side "$side" "$work/$side" yes
    measure "$side" aof_set_p1 "$P1_REQUESTS" 1 -r 1000000 -t set
    measure "$side" aof_set_p16 "$P16_REQUESTS" 16 -r 1000000 -t set
    stop_side
    share "$side" set_p1
    share "$side" set_p16
}

# share SIDE NAME: the AOF run's requests/s as a % of this round's AOF-off run.
share() {
    local off on
    off=$(awk -F'\t' -v s="$1" -v n="$2_rps" '$1 == s && $2 == n { v = $3 } END { print v }' "$results")
    on=$(awk -F'\t' -v s="$1" -v n="aof_$2_rps" '$1 == s && $2 == n { v = $3 } END { print v }' "$results")
    record "$1" "aof_$2_share" "$(echo "100 * $on / $off" | bc -l)"
}

run_rotating "${SIDES[@]}"

python3 "$HELPER" sides-table "$results" \
    "The floor beside kvstore and Redis, ${BENCH_CLIENTS:-50} clients, median of $ROUNDS rounds [min–max]" \
    "floor_io_uring,floor_epoll,io_uring,epoll,redis" \
    "${SET_GET_ROWS[@]}" \
    "SET P1, AOF everysec, requests/s|aof_set_p1_rps|,.0f" \
    "SET P1, AOF everysec, server CPU µs/request|aof_set_p1_cpu|.3f" \
    "SET P1, AOF everysec, % of the round's AOF-off requests/s|aof_set_p1_share|.1f" \
    "SET P16, AOF everysec, requests/s|aof_set_p16_rps|,.0f" \
    "SET P16, AOF everysec, server CPU µs/request|aof_set_p16_cpu|.3f" \
    "SET P16, AOF everysec, % of the round's AOF-off requests/s|aof_set_p16_share|.1f"
[[ -z ${RESULTS_OUT:-} ]] || cp "$results" "$RESULTS_OUT"
