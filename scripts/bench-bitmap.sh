#!/usr/bin/env bash
# Side-by-side bitmap benchmark, kvstore against redis-server:
#   - BITCOUNT of a 64 MB bitmap of random bytes (the same bytes for both
#     servers), one client: the server's CPU ms per call;
#   - BITCOUNT of that bitmap over a BIT range (a few bytes trimmed off
#     both ends), the same;
#   - SETBIT and GETBIT of bit 1000 of one of 100,000 random keys (a
#     redis-benchmark __rand_int__ is zero-padded, which no bit offset
#     parser accepts, so the randomness is in the key), 50 clients at
#     pipelines 1 and 16: requests/s and the server's CPU µs per request.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-bitmap.sh  (COUNTS=100 REQUESTS=1000000 ROUNDS=3;
#        KVSTORE_BIN=... to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
COUNTS=${COUNTS:-100}
REQUESTS=${REQUESTS:-1000000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)


bitmap="$work/bitmap.bin"
head -c $((64 << 20)) /dev/urandom >"$bitmap"

run_side() { # SIDE
    local side=$1 dir="$work/$1" port c0 c1 p rps
    start_fresh "$side" "$dir"
    redis-cli -p "$port" -x set big <"$bitmap" >/dev/null
    [[ $(redis-cli -p "$port" strlen big) == $((64 << 20)) ]] || { echo "$side: bitmap not loaded" >&2; exit 1; }
    record "$side" "bits_set" "$(redis-cli -p "$port" bitcount big)"

    c0=$(cpu_ticks "$pid")
    BENCH_CLIENTS=1 bench_rps "$port" "$COUNTS" 1 bitcount big >/dev/null
    c1=$(cpu_ticks "$pid")
    record "$side" "bitcount_ms" "$(echo "($c1 - $c0) * 10 / $COUNTS" | bc -l)"

    c0=$(cpu_ticks "$pid")
    BENCH_CLIENTS=1 bench_rps "$port" "$COUNTS" 1 bitcount big 13 536870900 bit >/dev/null
    c1=$(cpu_ticks "$pid")
    record "$side" "bitcount_bit_ms" "$(echo "($c1 - $c0) * 10 / $COUNTS" | bc -l)"

    for p in 1 16; do
        for cmd in setbit getbit; do
            local args=(-r 100000 "$cmd" bm:__rand_int__ 1000)
            [[ $cmd == setbit ]] && args+=(1)
            c0=$(cpu_ticks "$pid")
            rps=$(bench_rps "$port" "$REQUESTS" "$p" "${args[@]}")
            c1=$(cpu_ticks "$pid")
            record "$side" "${cmd}_rps_p$p" "$rps"
            record "$side" "${cmd}_cpu_p$p" "$(echo "($c1 - $c0) * 10000 / $REQUESTS" | bc -l)"
        done
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Bitmaps, median of $ROUNDS rounds [min–max]" \
    "Bits set in the 64 MB bitmap|bits_set|.0f" \
    "BITCOUNT 64 MB server CPU ms/call|bitcount_ms|.2f" \
    "BITCOUNT 64 MB BIT range server CPU ms/call|bitcount_bit_ms|.2f" \
    "SETBIT P1 requests/s|setbit_rps_p1|,.0f" \
    "SETBIT P1 server CPU µs/call|setbit_cpu_p1|.3f" \
    "GETBIT P1 requests/s|getbit_rps_p1|,.0f" \
    "GETBIT P1 server CPU µs/call|getbit_cpu_p1|.3f" \
    "SETBIT P16 requests/s|setbit_rps_p16|,.0f" \
    "SETBIT P16 server CPU µs/call|setbit_cpu_p16|.3f" \
    "GETBIT P16 requests/s|getbit_rps_p16|,.0f" \
    "GETBIT P16 server CPU µs/call|getbit_cpu_p16|.3f"
