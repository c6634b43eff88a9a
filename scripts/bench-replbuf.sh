#!/usr/bin/env bash
# Side-by-side replication buffer benchmark, kvstore master → kvstore
# replicas against redis → redis:
#   - memory: REPLICAS replicas in sync, then stopped (SIGSTOP) while the
#     master takes MB megabytes of writes that do not grow the dataset (SET
#     of one key to a 100 KB value, over and over): the master's used_memory
#     growth, mem_total_replication_buffers and repl_backlog_histlen (MB).
#     With one buffer shared by the backlog and the replicas, the growth is
#     about one copy of what they lag, whatever their number;
#   - the replicas resumed: seconds until all are in sync again;
#   - steady state with the replicas attached and reading: SET at P=1 (50
#     clients, N requests), requests/s and the master's CPU µs per request.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-replbuf.sh   (REPLICAS=3 MB=200 ROUNDS=3 SET_REQUESTS=500000)
set -euo pipefail
cd "$(dirname "$0")/.."
REPLICAS=${REPLICAS:-3}
MB=${MB:-200}
ROUNDS=${ROUNDS:-3}
SET_REQUESTS=${SET_REQUESTS:-500000}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no --repl-diskless-sync yes --repl-diskless-sync-delay 0
    --client-output-buffer-limit "replica 0 0 0" --repl-timeout 600)

# The writes: MB × 10 SETs of one key to a 100 KB value, as RESP.
python3 - "$MB" >"$work/writes.resp" <<'PY'
import sys
n = int(sys.argv[1]) * 10
val = b"v" * 102400
cmd = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n%s\r\n" % (len(val), val)
sys.stdout.buffer.write(cmd * n)
PY

mb() { echo "($1) / 1048576" | bc -l; }

run_side() { # SIDE
    local side=$1 mport mpid rports=() rpids=() used0 used1 t0 t1
    mport=$(free_port)
    mkdir -p "$work/$side-m"
    start "$side" "$work/$side-m" "$mport"; mpid=$pid
    wait_ping "$mport"
    redis-cli -p "$mport" set big start >/dev/null
    for ((i = 0; i < REPLICAS; i++)); do
        local rport; rport=$(free_port)
        mkdir -p "$work/$side-r$i"
        start "$side" "$work/$side-r$i" "$rport"
        rports+=("$rport"); rpids+=("$pid")
        wait_ping "$rport"
        redis-cli -p "$rport" replicaof 127.0.0.1 "$mport" >/dev/null
    done
    for r in "${rports[@]}"; do wait_synced "$r" "$mport"; done
    # Memory: the replicas stop reading while the master is written.
    kill -STOP "${rpids[@]}"
    used0=$(info_field "$mport" memory used_memory)
    redis-cli -p "$mport" --pipe <"$work/writes.resp" >/dev/null
    used1=$(info_field "$mport" memory used_memory)
    record "$side" used_growth_mb "$(mb "$used1 - $used0")"
    record "$side" repl_buffers_mb "$(mb "$(info_field "$mport" memory mem_total_replication_buffers)")"
    record "$side" histlen_mb "$(mb "$(info_field "$mport" replication repl_backlog_histlen)")"
    # They resume and catch up.
    t0=$(now)
    kill -CONT "${rpids[@]}"
    for r in "${rports[@]}"; do wait_synced "$r" "$mport"; done
    t1=$(now)
    record "$side" catch_up_s "$(echo "$t1 - $t0" | bc)"
    # Steady state with the replicas attached.
    pid=$mpid port=$mport measure "$side" set_p1 "$SET_REQUESTS" 1 -r 1000000 -t set
    for r in "${rports[@]}"; do redis-cli -p "$r" shutdown nosave >/dev/null 2>&1 || true; done
    redis-cli -p "$mport" shutdown nosave >/dev/null 2>&1 || true
    wait "$mpid" "${rpids[@]}" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "$REPLICAS replicas stopped while the master takes $MB MB of writes, then resumed; median of $ROUNDS rounds [min–max]" \
    "master used_memory growth, MB|used_growth_mb|,.1f" \
    "mem_total_replication_buffers, MB|repl_buffers_mb|,.1f" \
    "repl_backlog_histlen, MB|histlen_mb|,.1f" \
    "seconds for the resumed replicas to catch up|catch_up_s|.2f" \
    "SET P1 with the replicas: requests/s|set_p1_rps|,.0f" \
    "SET P1 with the replicas: master CPU µs/request|set_p1_cpu|.2f"
