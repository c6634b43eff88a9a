#!/usr/bin/env bash
# Side-by-side HyperLogLog benchmark, kvstore against redis-server, with
# redis-benchmark (50 clients):
#   - PFADD of random elements (-r) into one HLL (dense after the first few
#     thousand) at pipelines of 1 and 16: requests/s and the server's CPU µs
#     per call (user+sys from /proc);
#   - PFCOUNT of KEYS dense HLLs of ELEMENTS elements each (the union's
#     estimate: every call merges them all): calls/s and CPU µs/call;
#   - PFMERGE of the same HLLs into a destination: calls/s and CPU µs/call.
# The HLLs are built by a script from the same elements on both servers,
# so both count the same registers. ROUNDS rounds (default 3), interleaved,
# alternating who goes first; the table shows medians with the min–max
# spread.
#
# Usage: scripts/bench-hll.sh  (REQUESTS=1000000 COUNTS=20000 KEYS=10 ELEMENTS=100000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-1000000}
COUNTS=${COUNTS:-20000}
KEYS=${KEYS:-10}
ELEMENTS=${ELEMENTS:-100000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)

keys=()
for ((i = 1; i <= KEYS; i++)); do keys+=("hll:$i"); done

run_side() { # SIDE
    local side=$1 dir="$work/$1" p
    start_fresh "$side" "$dir"
    for p in 1 16; do
        measure "$side" "pfadd_p$p" "$REQUESTS" "$p" -r 100000000 pfadd hll __rand_int__
    done
    # KEYS dense HLLs, each with its own ELEMENTS elements.
    for key in "${keys[@]}"; do
        redis-cli -p "$port" eval \
            "for i = 1, tonumber(ARGV[1]) do redis.call('pfadd', KEYS[1], KEYS[1] .. ':' .. i) end" \
            1 "$key" "$ELEMENTS" >/dev/null
    done
    [[ $(redis-cli -p "$port" pfdebug encoding "${keys[0]}") == dense ]] ||
        { echo "$side: ${keys[0]} is not dense" >&2; exit 1; }
    measure "$side" pfcount "$COUNTS" 1 pfcount "${keys[@]}"
    measure "$side" pfmerge "$COUNTS" 1 pfmerge dest "${keys[@]}"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "HyperLogLog, 50 clients, median of $ROUNDS rounds [min–max]" \
    "PFADD P1 requests/s|pfadd_p1_rps|,.0f" \
    "PFADD P1 server CPU µs/call|pfadd_p1_cpu|.3f" \
    "PFADD P16 requests/s|pfadd_p16_rps|,.0f" \
    "PFADD P16 server CPU µs/call|pfadd_p16_cpu|.3f" \
    "PFCOUNT of $KEYS dense keys calls/s|pfcount_rps|,.0f" \
    "PFCOUNT of $KEYS dense keys server CPU µs/call|pfcount_cpu|.2f" \
    "PFMERGE of $KEYS dense keys calls/s|pfmerge_rps|,.0f" \
    "PFMERGE of $KEYS dense keys server CPU µs/call|pfmerge_cpu|.2f"
