# Shared by the bench-*.sh scripts (sourced, not run): build,
# a temporary work directory with its servers killed on exit, and helpers.
# Sets KV, REDIS, work, pids; record() appends to $work/results.tsv.
REDIS=${REDIS_BIN:-redis-server}
if [[ -n ${KVSTORE_BIN:-} ]]; then
    KV=$KVSTORE_BIN
else
    # Rebuild (a no-op when nothing changed): the tree measured is this one.
    cargo build --release >&2
    KV=target/release/kvstore
fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM
HELPER="$(dirname "${BASH_SOURCE[0]}")/bench_helper.py"

# free_port, wait_ping
source "$(dirname "${BASH_SOURCE[0]}")/server-helpers.sh"
info_field() { redis-cli -p "$1" info "$2" | tr -d '\r' | grep "^$3:" | cut -d: -f2; }
now() { date +%s.%N; }
# cpu_ticks PID: the server's user+system time so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# bench_rps PORT N P ARGS...: requests/s of one redis-benchmark run of the
# command ARGS (BENCH_CLIENTS clients, 50 unless set).
bench_rps() {
    local port=$1 n=$2 p=$3
    shift 3
    redis-benchmark -p "$port" -c "${BENCH_CLIENTS:-50}" -P "$p" -n "$n" --csv "$@" 2>/dev/null |
        awk -F, 'NR == 2 { gsub(/"/, "", $2); print $2 }'
}

# measure SIDE NAME N P ARGS...: one bench_rps run against $bench_port
# (default $port) recording requests/s and the server's ($pid) CPU µs per
# request.
measure() {
    local side=$1 name=$2 n=$3 p=$4 c0 c1 rps
    shift 4
    c0=$(cpu_ticks "$pid")
    rps=$(bench_rps "${bench_port:-$port}" "$n" "$p" "$@")
    c1=$(cpu_ticks "$pid")
    [[ -n $rps ]] || { echo "$side: redis-benchmark failed ($name)" >&2; exit 1; }
    record "$side" "${name}_rps" "$rps"
    record "$side" "${name}_cpu" "$(echo "($c1 - $c0) * 10000 / $n" | bc -l)"
}

results="$work/results.tsv"
: >"$results"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

# gen_sets N SIZE FILL: N SETs of key:%012d to a SIZE-byte value of FILL, as RESP.
gen_sets() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
n, size, fill = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
out = sys.stdout.buffer
val = fill * size
chunk = []
for i in range(n):
    k = b"key:%012d" % i
    chunk.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$%d\r\n%s\r\n" % (k, size, val))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
PY
}

# gen_random_sets N SIZE: N SETs of distinct random keys (key:%012d of
# random numbers) to random SIZE-byte values, as RESP.
gen_random_sets() {
    python3 - "$1" "$2" <<'PY'
import os, random, sys
n, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
rng = random.Random(42)
ids = rng.sample(range(10**12), n)
chunk = []
for i in ids:
    k = b"key:%012d" % i
    chunk.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$%d\r\n%s\r\n" % (k, size, os.urandom(size)))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
PY
}

# gen_small_collections N: N small collections as RESP, a third each of
# hashes of 4 fields, sets of 8 integers and sorted sets of 8 members.
gen_small_collections() {
    python3 - "$1" <<'PY'
import sys
sys.path.insert(0, "scripts")
from bench_helper import resp
n = int(sys.argv[1])
out = sys.stdout.buffer
chunk = []
for i in range(n):
    k = b"key:%012d" % i
    kind = i % 3
    if kind == 0:
        chunk.append(resp(b"HSET", k, b"name", b"user%d" % i, b"email", b"user%d@example.com" % i,
                          b"visits", b"%d" % (i * 7 % 100000), b"plan", b"free"))
    elif kind == 1:
        chunk.append(resp(b"SADD", k, *[b"%d" % (i * 13 + j * 1000) for j in range(8)]))
    else:
        args = []
        for j in range(8):
            args += [b"%d.5" % (i % 1000 + j), b"m%d" % j]
        chunk.append(resp(b"ZADD", k, *args))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
PY
}

# wait_loaded PORT: poll DBSIZE until the reply is a number (not -LOADING,
# not a refused connection); leaves it in $reply.
wait_loaded() {
    while :; do
        reply=$(redis-cli -p "$1" dbsize 2>&1 || true)
        [[ $reply =~ ^[0-9]+$ ]] && return 0
        sleep 0.01
    done
}

# wait_synced REPLICA_PORT MASTER_PORT: until the replica's link is up and
# its offset is the master's.
wait_synced() {
    while :; do
        if [[ $(info_field "$1" replication master_link_status) == up ]] &&
            [[ $(info_field "$1" replication slave_repl_offset) == $(info_field "$2" replication master_repl_offset) ]]; then
            return 0
        fi
        sleep 0.01
    done
}

# start SIDE DIR PORT: a server (kvstore or redis) with the script's
# SERVER_ARGS, no snapshots, logging to DIR/log; its pid in $pid.
start() {
    local bin=$KV
    [[ $1 == redis ]] && bin=$REDIS
    "$bin" --port "$3" --bind 127.0.0.1 --save "" "${SERVER_ARGS[@]}" --dir "$2" --logfile "$2/log" --daemonize no >/dev/null 2>&1 </dev/null &
    pid=$!
    pids+=("$pid")
}

# start_fresh SIDE DIR: `start` on an emptied DIR and a free port, once it
# answers PING; the port in $port (the caller's local, if it has one).
start_fresh() {
    rm -rf "$2"; mkdir -p "$2"
    port=$(free_port)
    start "$1" "$2" "$port"
    wait_ping "$port"
}

# run_rotating SIDE...: ROUNDS rounds of run_side for each SIDE, interleaved,
# the side that goes first rotating.
run_rotating() {
    local sides=("$@") round i
    for ((round = 1; round <= ROUNDS; round++)); do
        for ((i = 0; i < ${#sides[@]}; i++)); do
            side=${sides[$(((i + round - 1) % ${#sides[@]}))]}
            echo "round $round/$ROUNDS: $side" >&2
            run_side "$side"
        done
    done
}

# The sides-table rows of redis-benchmark's SET and GET at pipelines 1 and
# 16 as `measure` records them (set_p1, get_p1, set_p16, get_p16).
SET_GET_ROWS=(
    "SET P1 requests/s|set_p1_rps|,.0f"
    "SET P1 server CPU µs/request|set_p1_cpu|.3f"
    "GET P1 requests/s|get_p1_rps|,.0f"
    "GET P1 server CPU µs/request|get_p1_cpu|.3f"
    "SET P16 requests/s|set_p16_rps|,.0f"
    "SET P16 server CPU µs/request|set_p16_cpu|.3f"
    "GET P16 requests/s|get_p16_rps|,.0f"
    "GET P16 server CPU µs/request|get_p16_cpu|.3f"
)

# run_rounds: ROUNDS rounds of run_side, interleaved, alternating who goes first.
run_rounds() {
    for ((round = 1; round <= ROUNDS; round++)); do
        if ((round % 2)); then order=(kvstore redis); else order=(redis kvstore); fi
        for side in "${order[@]}"; do
            echo "round $round/$ROUNDS: $side" >&2
            run_side "$side"
        done
    done
}
