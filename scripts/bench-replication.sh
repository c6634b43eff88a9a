#!/usr/bin/env bash
# Side-by-side full synchronisation benchmark: a fresh replica of a master
# holding KEYS keys of VALUE_SIZE bytes (default 3M × 100 B), kvstore →
# kvstore against redis → redis, both diskless with no delay:
#   - seconds from REPLICAOF to the replica's link up with the master's
#     offset (the whole transfer and load), and the replica's DBSIZE checked,
#   - the master's CPU seconds (user+sys, its children included: the
#     snapshot child) and peak RSS (its own, MB) over the sync,
# then steady state with the replica attached: SET at P=16 for N requests,
# the master's CPU µs per request.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Both replicas use DISKLESS_LOAD for repl-diskless-load (default disabled,
# Redis's default: Redis then writes the dump to disk and loads it once it
# is complete; on-empty-db makes it load from the socket as it arrives).
#
# Usage: scripts/bench-replication.sh   (KEYS=3000000 VALUE_SIZE=100 ROUNDS=3 SET_REQUESTS=2000000 DISKLESS_LOAD=disabled)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-3000000}
VALUE_SIZE=${VALUE_SIZE:-100}
ROUNDS=${ROUNDS:-3}
SET_REQUESTS=${SET_REQUESTS:-2000000}
DISKLESS_LOAD=${DISKLESS_LOAD:-disabled}
source scripts/bench-common.sh

echo "generating $KEYS SETs with $VALUE_SIZE-byte values" >&2
gen_sets "$KEYS" "$VALUE_SIZE" v >"$work/load.resp"

SERVER_ARGS=(--appendonly no --repl-diskless-sync yes --repl-diskless-sync-delay 0 --repl-diskless-load "$DISKLESS_LOAD")

# cpu_ticks PID: utime+stime of the process and its reaped children.
cpu_ticks() { awk '{ print $14 + $15 + $16 + $17 }' "/proc/$1/stat"; }
rss_mb() { awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }

run_side() { # SIDE
    local side=$1 mdir="$work/$1-master" rdir="$work/$1-replica" mport rport mpid c0 c1 t0 t1
    rm -rf "$mdir" "$rdir"; mkdir -p "$mdir" "$rdir"
    mport=$(free_port); rport=$(free_port)
    start "$side" "$mdir" "$mport"; mpid=$pid
    start "$side" "$rdir" "$rport"; local rpid=$pid
    wait_ping "$mport"; wait_ping "$rport"
    redis-cli -p "$mport" --pipe <"$work/load.resp" >/dev/null
    [[ $(redis-cli -p "$mport" dbsize) == "$KEYS" ]] || { echo "$side: DBSIZE on the master is not $KEYS" >&2; exit 1; }
    c0=$(cpu_ticks "$mpid")
    t0=$(now)
    redis-cli -p "$rport" replicaof 127.0.0.1 "$mport" >/dev/null
    wait_synced "$rport" "$mport"
    t1=$(now)
    c1=$(cpu_ticks "$mpid")
    [[ $(redis-cli -p "$rport" dbsize) == "$KEYS" ]] || { echo "$side: DBSIZE on the replica is not $KEYS" >&2; exit 1; }
    record "$side" sync_s "$(echo "$t1 - $t0" | bc)"
    record "$side" sync_cpu_s "$(echo "($c1 - $c0) / 100" | bc -l)"
    record "$side" master_peak_rss_mb "$(rss_mb "$mpid")"
    # Steady state: SETs at P=16 with the replica attached.
    c0=$(cpu_ticks "$mpid")
    redis-benchmark -p "$mport" -c 50 -P 16 -n "$SET_REQUESTS" -r 1000000 -t set --csv >/dev/null 2>&1
    c1=$(cpu_ticks "$mpid")
    record "$side" set_p16_cpu_us "$(echo "($c1 - $c0) * 10000 / $SET_REQUESTS" | bc -l)"
    redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
    redis-cli -p "$mport" shutdown nosave >/dev/null 2>&1 || true
    wait "$mpid" "$rpid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Full sync to a fresh replica: $KEYS keys, $VALUE_SIZE-byte values, diskless, repl-diskless-load $DISKLESS_LOAD, median of $ROUNDS rounds [min–max]" \
    "seconds from REPLICAOF to in sync|sync_s|.2f" \
    "master CPU seconds during the sync (children included)|sync_cpu_s|.2f" \
    "master peak RSS MB|master_peak_rss_mb|,.0f" \
    "SET P16 with a replica: master CPU µs/request|set_p16_cpu_us|.3f"
