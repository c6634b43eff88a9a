#!/usr/bin/env bash
# Side-by-side snapshot benchmark: kvstore vs redis-server 7.0 on the same
# dataset (default 3M keys with 100-byte values, ~360 MB dump):
#   - SAVE time (blocking save of the whole dataset),
#   - BGSAVE: latest_fork_usec and the worst latency a client saw meanwhile,
#   - load time at startup (from each server's "DB loaded from disk" log line).
#
# Usage: scripts/bench-persistence.sh        (KEYS=3000000 VALUE_SIZE=100)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-3000000}
VALUE_SIZE=${VALUE_SIZE:-100}
KV=${KVSTORE_BIN:-target/release/kvstore}
REDIS=${REDIS_BIN:-redis-server}
[[ -x $KV ]] || cargo build --release
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() { for _ in $(seq 1 600); do [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; exit 1; }

echo "generating $KEYS SETs with $VALUE_SIZE-byte values" >&2
python3 - "$KEYS" "$VALUE_SIZE" >"$work/load.resp" <<'PY'
import sys
n, size = int(sys.argv[1]), int(sys.argv[2])
out = sys.stdout.buffer
val = b"v" * size
chunk = []
for i in range(n):
    k = b"key:%012d" % i
    chunk.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$%d\r\n%s\r\n" % (k, size, val))
    if len(chunk) == 10000:
        out.write(b"".join(chunk)); chunk = []
out.write(b"".join(chunk))
PY

declare -A save_s bg_fork bg_max load_s dump_mb
for side in kvstore redis; do
    bin=$KV; [[ $side == redis ]] && bin=$REDIS
    dir="$work/$side"; mkdir -p "$dir"
    port=$(free_port)
    "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --logfile "$dir/log" --daemonize no >/dev/null 2>&1 </dev/null &
    pids+=($!); pid=$!
    wait_ping "$port"
    redis-cli -p "$port" --pipe <"$work/load.resp" >/dev/null
    t0=$(date +%s.%N); redis-cli -p "$port" save >/dev/null; t1=$(date +%s.%N)
    save_s[$side]=$(echo "$t1 - $t0" | bc)
    dump_mb[$side]=$(( $(stat -c %s "$dir/dump.rdb") / 1048576 ))
    # BGSAVE while a client pings: its worst latency is the stall it saw.
    redis-cli -p "$port" bgsave >/dev/null
    redis-benchmark -p "$port" -c 1 -n 20000 -t ping --csv 2>/dev/null | tail -n 1 >"$dir/ping.csv"
    while [[ $(redis-cli -p "$port" info persistence | tr -d '\r' | grep rdb_bgsave_in_progress | cut -d: -f2) == 1 ]]; do sleep 0.1; done
    bg_fork[$side]=$(redis-cli -p "$port" info stats | tr -d '\r' | grep latest_fork_usec | cut -d: -f2)
    bg_max[$side]=$(tr -d '"' <"$dir/ping.csv" | cut -d, -f8)
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    # Restart on the dump and read the load time from the log.
    : >"$dir/log"
    "$bin" --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --logfile "$dir/log" --daemonize no >/dev/null 2>&1 </dev/null &
    pids+=($!); pid=$!
    wait_ping "$port"
    load_s[$side]=$(grep -o 'DB loaded from disk: [0-9.]* seconds' "$dir/log" | grep -o '[0-9.]*' | head -n 1)
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
done

ratio() { python3 -c "a,b=float('$1'),float('$2'); print('%.2f' % (a/b) if b else '-')"; }
echo "## Snapshots: $KEYS keys, $VALUE_SIZE-byte values"
echo
echo "| measure | kvstore | redis | ratio |"
echo "| --- | --- | --- | --- |"
echo "| dump size MB | ${dump_mb[kvstore]} | ${dump_mb[redis]} | $(ratio "${dump_mb[kvstore]}" "${dump_mb[redis]}") |"
echo "| SAVE seconds | ${save_s[kvstore]} | ${save_s[redis]} | $(ratio "${save_s[kvstore]}" "${save_s[redis]}") |"
echo "| load seconds (startup) | ${load_s[kvstore]} | ${load_s[redis]} | $(ratio "${load_s[kvstore]}" "${load_s[redis]}") |"
echo "| BGSAVE latest_fork_usec | ${bg_fork[kvstore]} | ${bg_fork[redis]} | $(ratio "${bg_fork[kvstore]}" "${bg_fork[redis]}") |"
echo "| worst PING latency during BGSAVE (ms) | ${bg_max[kvstore]} | ${bg_max[redis]} | $(ratio "${bg_max[kvstore]}" "${bg_max[redis]}") |"
