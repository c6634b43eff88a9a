#!/usr/bin/env bash
# Side-by-side eviction benchmark, kvstore against redis-server:
#   - hit ratio of a cache-aside workload (GET; on a miss, SET the value)
#     of REQUESTS requests over KEYS keys drawn from a Zipf distribution
#     (exponent ZIPF, the same sequence for both servers), with maxmemory
#     giving each server the same budget above its idle memory: PERCENT% of
#     the bytes Redis needs for the whole dataset (measured first); for
#     every policy in POLICIES;
#   - SET of new random keys at the limit (every write evicts), 50
#     clients at pipelines 1 and 16: requests/s and the server's CPU µs per
#     request.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-evict.sh  (KEYS=200000 REQUESTS=2000000 ZIPF=0.99
#        PERCENT=30 VALUE=100 POLICIES="allkeys-lru allkeys-lfu"
#        SETS=1000000 ROUNDS=3; KVSTORE_BIN=... to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-200000}
REQUESTS=${REQUESTS:-2000000}
ZIPF=${ZIPF:-0.99}
PERCENT=${PERCENT:-30}
VALUE=${VALUE:-100}
POLICIES=${POLICIES:-allkeys-lru allkeys-lfu}
SETS=${SETS:-1000000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)
PY=python3
python3 -c 'import redis' 2>/dev/null || PY=/usr/bin/python3


# The request sequence, once for all rounds: key indexes, Zipf-distributed.
seq_file="$work/sequence.bin"
$PY - "$KEYS" "$REQUESTS" "$ZIPF" "$seq_file" <<'PY'
import array, bisect, itertools, random, sys
keys, n, s, path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
cum = list(itertools.accumulate(1.0 / (i + 1) ** s for i in range(keys)))
total = cum[-1]
rng = random.Random(11)
# Rank r goes to a scattered key, so hot keys are not neighbours.
perm = list(range(keys))
rng.shuffle(perm)
out = array.array("I", (perm[bisect.bisect_left(cum, rng.random() * total)] for _ in range(n)))
with open(path, "wb") as f:
    out.tofile(f)
PY

# The workload: GET each key of the sequence (pipelined in batches); SET
# the misses; print the hit ratio.
workload() { # PORT
    $PY - "$1" "$seq_file" "$VALUE" <<'PY'
import array, sys, redis
port, path, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
seq = array.array("I")
with open(path, "rb") as f:
    seq.frombytes(f.read())
r = redis.Redis(port=port)
value = b"v" * size
hits = 0
batch = 1000
for start in range(0, len(seq), batch):
    keys = [b"key:%d" % k for k in seq[start:start + batch]]
    got = r.mget(keys)
    misses = [k for k, v in zip(keys, got) if v is None]
    hits += len(keys) - len(misses)
    if misses:
        p = r.pipeline(transaction=False)
        for k in misses:
            p.set(k, value)
        p.execute()
print(hits / len(seq))
PY
}

# Bytes Redis needs for the whole dataset (its used_memory growth).
dataset_bytes() {
    local dir="$work/measure" port m0 m1
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    start redis "$dir" "$port"
    wait_ping "$port"
    m0=$(info_field "$port" memory used_memory)
    $PY - "$port" "$KEYS" "$VALUE" <<'PY'
import sys, redis
port, keys, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
r = redis.Redis(port=port)
p = r.pipeline(transaction=False)
for i in range(keys):
    p.set(b"key:%d" % i, b"v" * size)
    if i % 10000 == 9999:
        p.execute()
p.execute()
PY
    m1=$(info_field "$port" memory used_memory)
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    echo $((m1 - m0))
}
DATASET=$(dataset_bytes)
BUDGET=$((DATASET * PERCENT / 100))
echo "dataset on redis: $DATASET bytes; budget $BUDGET bytes" >&2

run_side() { # SIDE
    local side=$1 dir="$work/$1" port c0 c1 p rps base policy
    for policy in $POLICIES; do
        rm -rf "$dir"; mkdir -p "$dir"
        port=$(free_port)
        start "$side" "$dir" "$port"
        wait_ping "$port"
        base=$(info_field "$port" memory used_memory)
        redis-cli -p "$port" config set maxmemory $((base + BUDGET)) >/dev/null
        redis-cli -p "$port" config set maxmemory-policy "$policy" >/dev/null
        record "$side" "hits_$policy" "$(workload "$port")"
        record "$side" "keys_$policy" "$(redis-cli -p "$port" dbsize)"
        redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
        wait "$pid" 2>/dev/null || true
    done

    start_fresh "$side" "$dir"
    base=$(info_field "$port" memory used_memory)
    redis-cli -p "$port" config set maxmemory $((base + BUDGET)) >/dev/null
    redis-cli -p "$port" config set maxmemory-policy allkeys-lru >/dev/null
    # Fill to the limit first, so every measured SET evicts.
    bench_rps "$port" "$KEYS" 16 -r 100000000 -d "$VALUE" set __rand_int__ __rand_int__ >/dev/null
    for p in 1 16; do
        c0=$(cpu_ticks "$pid")
        rps=$(bench_rps "$port" "$SETS" "$p" -r 100000000 -d "$VALUE" set __rand_int__ __rand_int__)
        c1=$(cpu_ticks "$pid")
        record "$side" "set_rps_p$p" "$rps"
        record "$side" "set_cpu_p$p" "$(echo "($c1 - $c0) * 10000 / $SETS" | bc -l)"
    done
    record "$side" "evicted" "$(info_field "$port" stats evicted_keys)"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

rows=()
for policy in $POLICIES; do
    rows+=("Hit ratio, $policy|hits_$policy|.4f" "Keys held at the end, $policy|keys_$policy|,.0f")
done
python3 "$HELPER" side-table "$results" \
    "Eviction: $KEYS keys of $VALUE B, Zipf $ZIPF, $REQUESTS requests, budget $PERCENT% of Redis's dataset ($BUDGET B); median of $ROUNDS rounds [min–max]" \
    "${rows[@]}" \
    "SET at the limit P1 requests/s|set_rps_p1|,.0f" \
    "SET at the limit P1 server CPU µs/call|set_cpu_p1|.3f" \
    "SET at the limit P16 requests/s|set_rps_p16|,.0f" \
    "SET at the limit P16 server CPU µs/call|set_cpu_p16|.3f" \
    "Keys evicted in the SET phase|evicted|,.0f"
