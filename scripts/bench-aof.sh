#!/usr/bin/env bash
# Side-by-side AOF benchmark: kvstore vs redis-server 7.0, same settings
# (appendonly yes, appendfsync no while filling, so the disk is not what is
# measured), same data:
#   - BGREWRITEAOF of KEYS keys (default 3M, 100-byte values): wall time
#     until aof_rewrite_in_progress is 0 again, and the worst latency a ping
#     client saw meanwhile (it runs before the fork);
#   - load at startup of an AOF made of that RDB-preamble base plus
#     EXTRA (default 1M) SETs in the incremental file: wall time from exec
#     to the first reply that is not -LOADING, and the server's own log
#     figure; DBSIZE is checked after every load.
# ROUNDS rounds (default 3), interleaved, alternating which server goes
# first; the table shows medians with the min–max spread.
#
# Usage: scripts/bench-aof.sh    (KEYS=3000000 EXTRA=1000000 VALUE_SIZE=100 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-3000000}
EXTRA=${EXTRA:-1000000}
VALUE_SIZE=${VALUE_SIZE:-100}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

echo "generating $KEYS SETs with $VALUE_SIZE-byte values" >&2
gen_sets "$KEYS" "$VALUE_SIZE" v >"$work/load.resp"
gen_sets "$EXTRA" "$VALUE_SIZE" w >"$work/extra.resp"

SERVER_ARGS=(--appendonly yes --appendfsync no --auto-aof-rewrite-percentage 0)

run_side() { # SIDE
    local side=$1 dir="$work/$1" port t0 t1 reply
    start_fresh "$side" "$dir"
    redis-cli -p "$port" --pipe <"$work/load.resp" >/dev/null
    [[ $(redis-cli -p "$port" dbsize) == "$KEYS" ]] || { echo "$side: DBSIZE after loading is not $KEYS" >&2; exit 1; }
    redis-benchmark -p "$port" -c 1 -n 400000 -t ping_inline --csv 2>/dev/null | tail -n 1 >"$dir/ping.csv" &
    local bench=$!
    sleep 0.5
    t0=$(now)
    redis-cli -p "$port" bgrewriteaof >/dev/null
    sleep 0.05
    while [[ $(info_field "$port" persistence aof_rewrite_in_progress) == 1 ]]; do sleep 0.02; done
    t1=$(now)
    record "$side" rewrite_s "$(echo "$t1 - $t0" | bc)"
    local still_running=0
    kill -0 "$bench" 2>/dev/null && still_running=1
    wait "$bench"
    ((still_running)) || echo "$side: warning: the ping client ended before the rewrite did" >&2
    record "$side" rewrite_ping_max_ms "$(tr -d '"' <"$dir/ping.csv" | cut -d, -f8)"
    redis-cli -p "$port" --pipe <"$work/extra.resp" >/dev/null
    redis-cli -p "$port" shutdown >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    record "$side" aof_mb "$(($(du -sb "$dir/appendonlydir" | cut -f1) / 1048576))"
    : >"$dir/log"
    t0=$(now)
    start "$side" "$dir" "$port"
    wait_loaded "$port"
    t1=$(now)
    [[ $reply == "$KEYS" ]] || { echo "$side: DBSIZE after the restart is $reply, not $KEYS" >&2; exit 1; }
    [[ $(redis-cli -p "$port" get key:000000000000) == "$(printf 'w%.0s' $(seq 1 "$VALUE_SIZE"))" ]] || { echo "$side: the incremental file was not applied" >&2; exit 1; }
    record "$side" load_wall_s "$(echo "$t1 - $t0" | bc)"
    record "$side" load_log_s "$(grep -o 'DB loaded from append only file: [0-9.]* seconds' "$dir/log" | grep -o '[0-9.]*' | head -n 1)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "AOF: $KEYS keys rewritten into a base, then $EXTRA SETs; $VALUE_SIZE-byte values; median of $ROUNDS rounds [min–max]" \
    "BGREWRITEAOF seconds|rewrite_s|.2f" \
    "worst PING latency during the rewrite (ms)|rewrite_ping_max_ms|.2f" \
    "AOF directory MB (base + incremental)|aof_mb|.0f" \
    "load seconds, exec to first non-LOADING reply|load_wall_s|.2f" \
    "load seconds, the server's own log|load_log_s|.2f"
