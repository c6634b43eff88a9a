#!/usr/bin/env bash
# Copy-on-write beside a snapshot child, kvstore vs redis-server 7.0: each
# server gets KEYS keys (DEBUG POPULATE, 10-byte values), then a BGSAVE whose
# child writes each key DELAY_US µs late (rdb-key-save-delay, so it runs
# while the parent is written to), meanwhile redis-benchmark SETs WRITES
# random keys out of 3×KEYS (the keyspace about doubles, so its table wants
# to grow while the child shares its pages). Reported: the child's
# copy-on-write once it ends (rdb_last_cow_size) and the keys at the end.
# ROUNDS rounds (default 3), interleaved; medians [min–max].
#
# Usage: scripts/bench-fork-cow.sh    (KEYS=1000000 WRITES=1500000 DELAY_US=8 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-1000000}
WRITES=${WRITES:-1500000}
DELAY_US=${DELAY_US:-8}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh
SERVER_ARGS=(--enable-debug-command yes)

run_side() { # SIDE
    local side=$1 dir="$work/$1" port
    start_fresh "$side" "$dir"
    redis-cli -p "$port" debug populate "$KEYS" key 10 >/dev/null
    redis-cli -p "$port" config set rdb-key-save-delay "$DELAY_US" >/dev/null
    redis-cli -p "$port" bgsave >/dev/null
    redis-benchmark -p "$port" -t set -r $((KEYS * 3)) -n "$WRITES" -P 16 -c 20 -q >/dev/null 2>&1
    [[ $(info_field "$port" persistence rdb_bgsave_in_progress) == 1 ]] ||
        echo "$side: warning: the child ended before the writes did (raise DELAY_US)" >&2
    while [[ $(info_field "$port" persistence rdb_bgsave_in_progress) == 1 ]]; do sleep 0.1; done
    record "$side" cow_mb "$(echo "$(info_field "$port" persistence rdb_last_cow_size) / 1048576" | bc -l)"
    record "$side" keys "$(redis-cli -p "$port" dbsize)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "BGSAVE of $KEYS keys while $WRITES SETs of random keys run; median of $ROUNDS rounds [min–max]" \
    "child's copy-on-write MB (rdb_last_cow_size)|cow_mb|.1f" \
    "keys at the end|keys|.0f"
