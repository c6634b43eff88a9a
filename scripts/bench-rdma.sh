#!/usr/bin/env bash
# RDMA full sync over the fake transport, beside the TCP paths: a fresh
# replica of a master holding KEYS keys of VALUE_SIZE bytes (default 3M ×
# 100 B, `rdbcompression no` so the dump is as large as the data), with
#   kv-rdma   kvstore → kvstore, the dump read by the replica with RDMA READ
#             (fake device, `--features rdma-fake`: the replica's "NIC"
#             thread copies from the master's mapped file),
#   kv-tcp    kvstore → kvstore, the same disk-based dump sent over TCP (the
#             path a failed RDMA transfer falls back to),
#   redis-tcp redis → redis, disk-based (`repl-diskless-sync no`).
# Measured per sync: seconds from REPLICAOF to in sync (transfer + load),
# the master's own CPU (user+sys of the server process, snapshot child
# excluded) and that CPU per GB of dump, the snapshot child's CPU, and for
# RDMA the transfer alone (INFO rdma_last_usec). ROUNDS rounds, interleaved,
# medians [min–max].
#
# Usage: scripts/bench-rdma.sh   (KEYS=3000000 VALUE_SIZE=100 ROUNDS=3)
# On a host with a real device (soft-RoCE counts), build with
# `cargo build --release --features rdma` and run with
# KVSTORE_BIN=target/release/kvstore RDMA_REAL=1: the fake is then not
# named, so both kvstore servers open the first verbs device.
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-3000000}
VALUE_SIZE=${VALUE_SIZE:-100}
ROUNDS=${ROUNDS:-3}
if [[ -z ${KVSTORE_BIN:-} ]]; then
    cargo build --release --features rdma-fake >&2
    export KVSTORE_BIN=target/release/kvstore
fi
source scripts/bench-common.sh
fabric="$work/fabric"
mkdir -p "$fabric"

echo "generating $KEYS SETs with $VALUE_SIZE-byte values" >&2
gen_sets "$KEYS" "$VALUE_SIZE" v >"$work/load.resp"

# own_ticks PID / child_ticks PID: the process's CPU, its reaped children's.
own_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
child_ticks() { awk '{ print $16 + $17 }' "/proc/$1/stat"; }

run_mode() { # MODE
    local mode=$1 mdir="$work/$1-master" rdir="$work/$1-replica" mport rport mpid rpid c0 c1 k0 k1 t0 t1 side=kvstore
    local margs=(--repl-diskless-sync no --rdbcompression no) rargs=(--rdbcompression no)
    [[ $mode == redis-tcp ]] && side=redis
    [[ $mode == kv-tcp ]] && rargs+=(--repl-rdma no)
    rm -rf "$mdir" "$rdir"; mkdir -p "$mdir" "$rdir"
    mport=$(free_port); rport=$(free_port)
    if [[ -z ${RDMA_REAL:-} ]]; then export KVSTORE_RDMA_FAKE=$fabric; fi
    SERVER_ARGS=("${margs[@]}")
    start "$side" "$mdir" "$mport"; mpid=$pid
    SERVER_ARGS=("${rargs[@]}")
    start "$side" "$rdir" "$rport"; rpid=$pid
    wait_ping "$mport"; wait_ping "$rport"
    redis-cli -p "$mport" --pipe <"$work/load.resp" >/dev/null
    [[ $(redis-cli -p "$mport" dbsize) == "$KEYS" ]] || { echo "$mode: DBSIZE on the master is not $KEYS" >&2; exit 1; }
    c0=$(own_ticks "$mpid"); k0=$(child_ticks "$mpid")
    t0=$(now)
    redis-cli -p "$rport" replicaof 127.0.0.1 "$mport" >/dev/null
    wait_synced "$rport" "$mport"
    t1=$(now)
    c1=$(own_ticks "$mpid"); k1=$(child_ticks "$mpid")
    [[ $(redis-cli -p "$rport" dbsize) == "$KEYS" ]] || { echo "$mode: DBSIZE on the replica is not $KEYS" >&2; exit 1; }
    local bytes
    bytes=$(stat -c %s "$mdir/dump.rdb")
    if [[ $mode == kv-rdma ]]; then
        [[ $(info_field "$mport" replication rdma_fullsyncs) == 1 ]] || { echo "kv-rdma: the sync did not go over RDMA" >&2; exit 1; }
        record "$mode" transfer_s "$(echo "$(info_field "$rport" replication rdma_last_usec) / 1000000" | bc -l)"
    elif [[ $side == kvstore ]]; then
        [[ $(info_field "$mport" replication rdma_fullsyncs) == 0 ]] || { echo "kv-tcp: the sync went over RDMA" >&2; exit 1; }
    fi
    record "$mode" dump_mb "$(echo "$bytes / 1000000" | bc -l)"
    record "$mode" sync_s "$(echo "$t1 - $t0" | bc)"
    record "$mode" master_cpu_s "$(echo "($c1 - $c0) / 100" | bc -l)"
    record "$mode" master_cpu_per_gb "$(echo "($c1 - $c0) / 100 / ($bytes / 1000000000)" | bc -l)"
    record "$mode" child_cpu_s "$(echo "($k1 - $k0) / 100" | bc -l)"
    redis-cli -p "$rport" shutdown nosave >/dev/null 2>&1 || true
    redis-cli -p "$mport" shutdown nosave >/dev/null 2>&1 || true
    wait "$mpid" "$rpid" 2>/dev/null || true
}

modes=(kv-rdma kv-tcp redis-tcp)
for ((round = 1; round <= ROUNDS; round++)); do
    for mode in "${modes[@]}"; do
        echo "round $round/$ROUNDS: $mode" >&2
        run_mode "$mode"
    done
    modes=("${modes[@]:1}" "${modes[0]}")
done

python3 "$HELPER" sides-table "$results" \
    "Full sync to a fresh replica: $KEYS keys, $VALUE_SIZE-byte values, disk-based dump, median of $ROUNDS rounds [min–max]" \
    kv-rdma,kv-tcp,redis-tcp \
    "dump MB|dump_mb|,.0f" \
    "seconds from REPLICAOF to in sync (transfer + load)|sync_s|.2f" \
    "transfer alone, seconds (RDMA: INFO rdma_last_usec)|transfer_s|.2f" \
    "master CPU seconds during the sync (server process)|master_cpu_s|.3f" \
    "master CPU seconds per GB of dump|master_cpu_per_gb|.3f" \
    "snapshot child CPU seconds|child_cpu_s|.2f"
