#!/usr/bin/env bash
# List commands, two servers side by side (by default this tree's kvstore
# and redis-server; A_BIN / B_BIN name any two binaries that take redis.conf
# options, e.g. a kvstore build from before a change): redis-benchmark with
# 50 clients and a pipeline of 16, requests/s and the server's CPU µs per
# call (user+sys from /proc, which shared CPUs disturb less than rps):
#   - LPUSH, RPUSH, LPOP, RPOP of a 3-byte element on one list;
#   - LRANGE 0 99 and LINDEX in the middle of a 10000-element list;
#   - the same reads on a list made with list-compress-depth 1, where the
#     middle of the list is LZF-compressed (LRANGE 5000 5099 decompresses a
#     node per call), and LPUSH onto it.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-lists.sh  (A_BIN=… B_BIN=… REQUESTS=400000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${REQUESTS:-400000}
ROUNDS=${ROUNDS:-3}
if [[ -z ${A_BIN:-} ]]; then
    cargo build --release >&2
    A_BIN=target/release/kvstore
fi
B_BIN=${B_BIN:-redis-server}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM
results="$work/results.tsv"
: >"$results"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() { for _ in $(seq 1 600); do [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }

# measure SIDE NAME ARGS...: one redis-benchmark run of the command ARGS.
measure() {
    local side=$1 name=$2 c0 c1 rps
    shift 2
    c0=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -c 50 -P 16 -n "$REQUESTS" --csv "$@" 2>/dev/null |
        awk -F, 'NR == 2 { gsub(/"/, "", $2); print $2 }')
    c1=$(cpu_ticks "$pid")
    printf '%s\t%s\t%s\t%s\n' "$side" "$name" "$rps" \
        "$(echo "($c1 - $c0) * 10000 / $REQUESTS" | bc -l)" >>"$results"
}

fill() { # LIST
    redis-cli -p "$port" eval "for i = 1, 10000 do redis.call('rpush', KEYS[1], 'element:' .. i) end" 1 "$1" >/dev/null
}

run_side() { # SIDE BIN
    local side=$1 dir="$work/$1"
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    "$2" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
        --logfile "$dir/log" --daemonize no >/dev/null 2>&1 </dev/null &
    pid=$!
    pids+=("$pid")
    wait_ping "$port"
    measure "$side" "LPUSH" lpush pushed xxx
    measure "$side" "RPUSH" rpush pushed xxx
    measure "$side" "LPOP" lpop pushed
    measure "$side" "RPOP" rpop pushed
    fill plain
    measure "$side" "LRANGE 0 99" lrange plain 0 99
    measure "$side" "LINDEX 5000" lindex plain 5000
    redis-cli -p "$port" config set list-compress-depth 1 >/dev/null
    fill packed
    measure "$side" "depth 1: LRANGE 0 99" lrange packed 0 99
    measure "$side" "depth 1: LRANGE 5000 5099" lrange packed 5000 5099
    measure "$side" "depth 1: LINDEX 5000" lindex packed 5000
    measure "$side" "depth 1: LPUSH" lpush packed xxx
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

for ((round = 1; round <= ROUNDS; round++)); do
    if ((round % 2)); then order=(A B); else order=(B A); fi
    for side in "${order[@]}"; do
        echo "round $round/$ROUNDS: $side" >&2
        if [[ $side == A ]]; then run_side A "$A_BIN"; else run_side B "$B_BIN"; fi
    done
done

python3 - "$results" "$A_BIN" "$B_BIN" "$ROUNDS" <<'PY'
import statistics, sys
path, a, b, rounds = sys.argv[1:]
rows = {}
order = []
for line in open(path):
    side, name, rps, cpu = line.rstrip("\n").split("\t")
    if name not in rows:
        rows[name] = {"A": ([], []), "B": ([], [])}
        order.append(name)
    rows[name][side][0].append(float(rps or 0))
    rows[name][side][1].append(float(cpu))
def cell(v, fmt):
    return f"{statistics.median(v):{fmt}} [{min(v):{fmt}}–{max(v):{fmt}}]"
print(f"A = {a}, B = {b}; 50 clients, P16, median of {rounds} rounds [min–max]\n")
print("| command | A rps | B rps | A CPU µs/call | B CPU µs/call |")
print("|---|---|---|---|---|")
for name in order:
    (ar, ac), (br, bc) = rows[name]["A"], rows[name]["B"]
    print(f"| {name} | {cell(ar, ',.0f')} | {cell(br, ',.0f')} | {cell(ac, '.3f')} | {cell(bc, '.3f')} |")
PY
