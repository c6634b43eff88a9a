#!/usr/bin/env bash
# Side-by-side streams benchmark, kvstore against redis-server, with
# redis-benchmark (50 clients):
#   - XADD at pipelines of 1 and 16 (auto IDs, one field, onto STREAMS
#     streams): requests/s and the server's CPU µs per call (user+sys
#     from /proc);
#   - XREADGROUP GROUP g c COUNT 100 STREAMS s > (each call delivers 100 new
#     entries into the PEL) on a stream of READS*100 entries: CPU µs/call;
#   - memory of a stream of ENTRIES entries (field "name", a random number
#     as value): used_memory after less before, bytes per entry.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-streams.sh  (REQUESTS=500000 READS=10000 ENTRIES=1000000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-500000}
READS=${READS:-10000}
ENTRIES=${ENTRIES:-1000000}
ROUNDS=${ROUNDS:-3}
STREAMS=${STREAMS:-100}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)


run_side() { # SIDE
    local side=$1 dir="$work/$1" port c0 c1 p rps m0 m1
    start_fresh "$side" "$dir"
    for p in 1 16; do
        c0=$(cpu_ticks "$pid")
        rps=$(bench_rps "$port" "$REQUESTS" "$p" -r "$STREAMS" xadd "s:__rand_int__" "*" name value)
        c1=$(cpu_ticks "$pid")
        record "$side" "xadd_rps_p$p" "$rps"
        record "$side" "xadd_cpu_p$p" "$(echo "($c1 - $c0) * 10000 / $REQUESTS" | bc -l)"
    done
    redis-cli -p "$port" flushall >/dev/null
    # A stream for the group to read, then READS calls of 100 entries each.
    bench_rps "$port" $((READS * 100)) 64 xadd q "*" job payload >/dev/null
    redis-cli -p "$port" xgroup create q g 0 >/dev/null
    c0=$(cpu_ticks "$pid")
    rps=$(bench_rps "$port" "$READS" 1 xreadgroup GROUP g c COUNT 100 STREAMS q ">")
    c1=$(cpu_ticks "$pid")
    record "$side" "xrg_rps" "$rps"
    record "$side" "xrg_cpu" "$(echo "($c1 - $c0) * 10000 / $READS" | bc -l)"
    # Memory on a fresh server: nothing left from the runs above.
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    start "$side" "$dir" "$port"
    wait_ping "$port"
    # The key exists before the first reading: what is measured is the
    # stream's growth, not the keyspace table's.
    redis-cli -p "$port" xadd mem 0-1 name 1 >/dev/null
    m0=$(info_field "$port" memory used_memory)
    bench_rps "$port" "$ENTRIES" 64 -r 1000000000 xadd mem "*" name "__rand_int__" >/dev/null
    local added=$(($(redis-cli -p "$port" xlen mem) - 1))
    [[ $added == "$ENTRIES" ]] || { echo "$side: $added entries added, not $ENTRIES" >&2; exit 1; }
    # The benchmark's 50 connections are gone (and their buffers freed).
    sleep 1
    m1=$(info_field "$port" memory used_memory)
    record "$side" "mem_per_entry" "$(echo "($m1 - $m0) / $added" | bc -l)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Streams, 50 clients, median of $ROUNDS rounds [min–max]" \
    "XADD P1 requests/s|xadd_rps_p1|,.0f" \
    "XADD P1 server CPU µs/call|xadd_cpu_p1|.3f" \
    "XADD P16 requests/s|xadd_rps_p16|,.0f" \
    "XADD P16 server CPU µs/call|xadd_cpu_p16|.3f" \
    "XREADGROUP COUNT 100 calls/s|xrg_rps|,.0f" \
    "XREADGROUP COUNT 100 server CPU µs/call|xrg_cpu|.2f" \
    "Stream of $ENTRIES entries: bytes/entry|mem_per_entry|.1f"
