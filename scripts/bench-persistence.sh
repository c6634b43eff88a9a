#!/usr/bin/env bash
# Side-by-side snapshot benchmark: kvstore vs redis-server 7.0 on the same
# dataset (default 3M keys with 100-byte values, ~360 MB dump):
#   - SAVE time (blocking save of the whole dataset),
#   - BGSAVE: latest_fork_usec, and the worst latency a ping client saw; the
#     client is already running when BGSAVE forks, so the fork stall counts,
#   - load time at startup, measured the same way for both: wall time from
#     exec to the first reply that is not -LOADING, and each server's own
#     "DB loaded from disk" log figure; DBSIZE is checked after every load;
#   - then both servers' load of the same file, Redis's own dump.
# DATASET=random: random keys (key:%012d of random numbers) with random
# values (incompressible) instead of sequential keys with a constant value.
# DATASET=small: KEYS small collections instead, a third each of hashes of
# 4 fields, sets of 8 integers and sorted sets of 8 members (Redis's compact
# encodings: listpack, intset), VALUE_SIZE ignored.
# ROUNDS rounds (default 3), interleaved, alternating which server goes
# first; the table shows medians with the min–max spread.
#
# Usage: scripts/bench-persistence.sh    (KEYS=3000000 VALUE_SIZE=100 ROUNDS=3 DATASET=fixed|random|small)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-3000000}
VALUE_SIZE=${VALUE_SIZE:-100}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

if [[ ${DATASET:-fixed} == small ]]; then
    echo "generating $KEYS small hashes, integer sets and sorted sets" >&2
    gen_small_collections "$KEYS" >"$work/load.resp"
    what="$KEYS small hashes, sets and sorted sets"
elif [[ ${DATASET:-fixed} == random ]]; then
    echo "generating $KEYS SETs of random keys with random $VALUE_SIZE-byte values" >&2
    gen_random_sets "$KEYS" "$VALUE_SIZE" >"$work/load.resp"
else
    echo "generating $KEYS SETs with $VALUE_SIZE-byte values" >&2
    gen_sets "$KEYS" "$VALUE_SIZE" v >"$work/load.resp"
fi

SERVER_ARGS=(--appendonly no)

# timed_load SIDE DIR PORT NAME WHEN: start a server on DIR's dump and
# record as NAME the wall time from exec to the first reply that is not
# -LOADING (connection refused counts as not yet); DBSIZE must be KEYS.
timed_load() {
    local t0 t1
    t0=$(now)
    start "$1" "$2" "$3"
    wait_loaded "$3"
    t1=$(now)
    [[ $reply == "$KEYS" ]] || { echo "$1: DBSIZE $5 is $reply, not $KEYS" >&2; exit 1; }
    record "$1" "$4" "$(echo "$t1 - $t0" | bc)"
}

run_side() { # SIDE
    local side=$1 dir="$work/$1" port t0 t1 reply
    start_fresh "$side" "$dir"
    redis-cli -p "$port" --pipe <"$work/load.resp" >/dev/null
    [[ $(redis-cli -p "$port" dbsize) == "$KEYS" ]] || { echo "$side: DBSIZE after loading is not $KEYS" >&2; exit 1; }
    t0=$(now); redis-cli -p "$port" save >/dev/null; t1=$(now)
    record "$side" save_s "$(echo "$t1 - $t0" | bc)"
    record "$side" dump_mb "$(($(stat -c %s "$dir/dump.rdb") / 1048576))"
    # The ping client runs before, during and after the fork.
    redis-benchmark -p "$port" -c 1 -n 300000 -t ping_inline --csv 2>/dev/null | tail -n 1 >"$dir/ping.csv" &
    local bench=$!
    sleep 0.5
    redis-cli -p "$port" bgsave >/dev/null
    while [[ $(info_field "$port" persistence rdb_bgsave_in_progress) == 1 ]]; do sleep 0.05; done
    local still_running=0
    kill -0 "$bench" 2>/dev/null && still_running=1
    wait "$bench"
    ((still_running)) || echo "$side: warning: the ping client ended before BGSAVE did" >&2
    record "$side" fork_usec "$(info_field "$port" stats latest_fork_usec)"
    record "$side" bgsave_ping_max_ms "$(tr -d '"' <"$dir/ping.csv" | cut -d, -f8)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    # Restart on the dump: wall time from exec to the first reply that is
    # not -LOADING (connection refused counts as not yet).
    : >"$dir/log"
    timed_load "$side" "$dir" "$port" load_wall_s "after the restart"
    record "$side" load_log_s "$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$dir/log" | grep -o '[0-9.]*' | head -n 1)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

# Both servers start on the same file, Redis's own dump (the last round's),
# interleaved: what a move from Redis to kvstore costs at startup.
cp "$work/redis/dump.rdb" "$work/redis-dump.rdb"
for ((round = 1; round <= ROUNDS; round++)); do
    for side in kvstore redis; do
        dir="$work/$side-on-redis"
        rm -rf "$dir"; mkdir -p "$dir"
        cp "$work/redis-dump.rdb" "$dir/dump.rdb"
        port=$(free_port)
        timed_load "$side" "$dir" "$port" redis_dump_load_wall_s "on Redis's dump"
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        wait "$pid" 2>/dev/null || true
    done
done

python3 "$HELPER" side-table "$results" \
    "Snapshots: ${what:-$KEYS keys, $VALUE_SIZE-byte values}, median of $ROUNDS rounds [min–max]" \
    "dump size MB|dump_mb|.0f" \
    "SAVE seconds|save_s|.2f" \
    "load seconds, exec to first non-LOADING reply|load_wall_s|.2f" \
    "load seconds, the server's own log|load_log_s|.2f" \
    "load seconds of Redis's own dump, exec to first non-LOADING reply|redis_dump_load_wall_s|.2f" \
    "BGSAVE latest_fork_usec|fork_usec|,.0f" \
    "worst PING latency during BGSAVE (ms)|bgsave_ping_max_ms|.2f"
