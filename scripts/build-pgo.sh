#!/usr/bin/env bash
# A profile-guided build of the server: target/pgo/kvstore.
#
#   1. builds an instrumented server (target/pgo-gen, -Cprofile-generate);
#   2. runs it through a training workload with redis-benchmark and
#      redis-cli: SET/GET of random keys at pipelines 1 and 16 on both
#      networking engines, redis-benchmark's other tests (INCR, lists,
#      sets, hashes, sorted sets, MSET, XADD, …), 100 KB values, the AOF
#      with appendfsync everysec and always and a rewrite, SAVE, BGSAVE,
#      and a restart that loads the dump, each server shut down cleanly so
#      that its counters are written (a forked child's are not: it leaves
#      with _exit);
#   3. merges the counters with the llvm-profdata of rustc's own LLVM
#      (rustup's llvm-tools component, added when missing);
#   4. builds the server again with -Cprofile-use (target/pgo-use) and
#      copies it to target/pgo/kvstore, with the profile beside it.
#
# The plain `cargo build --release` is what the README, the tests and CI
# use; this is for deployments that want the last few percent (see the
# README's figures) and for benchmarks: KVSTORE_BIN=target/pgo/kvstore.
#
# Usage: scripts/build-pgo.sh  (TRAIN_REQUESTS=2000000: the P=16 runs' length)
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN_REQUESTS=${TRAIN_REQUESTS:-2000000}
source scripts/server-helpers.sh

for tool in redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "build-pgo: $tool is needed (Debian: redis-tools)" >&2; exit 1; }
done

sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
if [[ ! -x $profdata ]]; then
    rustup component add llvm-tools >&2 || true
fi
[[ -x $profdata ]] || {
    echo "build-pgo: $profdata not found (rustup component add llvm-tools)" >&2
    exit 1
}

work=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT INT TERM

echo "build-pgo: building the instrumented server" >&2
RUSTFLAGS="-Cprofile-generate=$work/raw" CARGO_TARGET_DIR=target/pgo-gen \
    cargo build --release >&2
bin=target/pgo-gen/release/kvstore

# start DIR ARGS...: a server on $port in DIR; stop: SHUTDOWN NOSAVE and wait.
start() {
    local dir=$1
    shift
    port=$(free_port)
    "$bin" --port "$port" --dir "$dir" "$@" >"$dir/log" 2>&1 &
    pid=$!
    wait_ping "$port"
}
stop() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    pid=
}
bench() { redis-benchmark -p "$port" -c 50 -q "$@" >/dev/null; }
n=$TRAIN_REQUESTS

echo "build-pgo: training" >&2
for engine in io_uring epoll; do
    dir="$work/$engine"
    mkdir -p "$dir"
    start "$dir" --save "" --appendonly no --io-engine "$engine"
    bench -P 1 -r 1000000 -n $((n / 10)) -t set,get
    bench -P 16 -r 1000000 -n "$n" -t set,get
    # redis-benchmark's default tests (every type it knows), pipelined and not.
    bench -P 16 -r 100000 -n $((n / 10))
    bench -P 1 -r 100000 -n $((n / 100))
    bench -P 1 -r 100 -n 2000 -d 100000 -t set,get
    stop
done

dir="$work/aof"
mkdir -p "$dir"
start "$dir" --save "" --appendonly yes --appendfsync everysec
bench -P 1 -r 1000000 -n $((n / 10)) -t set,incr,lpush,hset
bench -P 16 -r 1000000 -n "$n" -t set
redis-cli -p "$port" bgrewriteaof >/dev/null
bench -P 16 -r 1000000 -n $((n / 4)) -t set
redis-cli -p "$port" config set appendfsync always >/dev/null
bench -P 1 -r 1000000 -n $((n / 100)) -t set
stop
# The restart replays the AOF.
start "$dir" --save "" --appendonly yes
stop

dir="$work/rdb"
mkdir -p "$dir"
start "$dir" --save "" --appendonly no
bench -P 16 -r 2000000 -n "$n" -d 100 -t set,lpush,sadd,hset,zadd
redis-cli -p "$port" bgsave >/dev/null
bench -P 16 -r 2000000 -n $((n / 4)) -d 100 -t set
until [[ $(redis-cli -p "$port" info persistence) == *rdb_bgsave_in_progress:0* ]]; do sleep 0.1; done
redis-cli -p "$port" save >/dev/null
stop
start "$dir" --save "" --appendonly no
stop

"$profdata" merge -o "$work/kvstore.profdata" "$work"/raw/*.profraw

echo "build-pgo: building the profile-guided server" >&2
RUSTFLAGS="-Cprofile-use=$work/kvstore.profdata" CARGO_TARGET_DIR=target/pgo-use \
    cargo build --release >&2
mkdir -p target/pgo
cp target/pgo-use/release/kvstore target/pgo/kvstore
cp "$work/kvstore.profdata" target/pgo/kvstore.profdata
echo "build-pgo: target/pgo/kvstore" >&2
