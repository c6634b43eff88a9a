#!/usr/bin/env bash
# A profile-guided build of the server: target/pgo/kvstore.
#
#   1. builds an instrumented server (target/pgo-gen, -Cprofile-generate;
#      its counters in target/pgo-gen/profraw, emptied before each training);
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
n=${TRAIN_REQUESTS:-2000000}
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

# A fixed, absolute place for the counters (servers change to their --dir):
# the same RUSTFLAGS each run, so a second run rebuilds nothing unchanged.
raw=$PWD/target/pgo-gen/profraw
echo "build-pgo: building the instrumented server" >&2
RUSTFLAGS="-Cprofile-generate=$raw" CARGO_TARGET_DIR=target/pgo-gen \
    cargo build --release >&2
rm -rf "$raw"
# $work, its clean-up, start and start_fresh (servers of $KV with SERVER_ARGS).
KVSTORE_BIN=target/pgo-gen/release/kvstore
source scripts/bench-common.sh

# stop: SHUTDOWN NOSAVE, so the server writes its counters, and wait.
stop() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}
bench() { redis-benchmark -p "$port" -c 50 -q "$@" >/dev/null; }

echo "build-pgo: training" >&2
for engine in io_uring epoll; do
    SERVER_ARGS=(--io-engine "$engine")
    start_fresh kvstore "$work/$engine"
    bench -P 1 -r 1000000 -n $((n / 10)) -t set,get
    bench -P 16 -r 1000000 -n "$n" -t set,get
    # redis-benchmark's default tests (every type it knows), pipelined and not.
    bench -P 16 -r 100000 -n $((n / 10))
    bench -P 1 -r 100000 -n $((n / 100))
    bench -P 1 -r 100 -n 2000 -d 100000 -t set,get
    stop
done

SERVER_ARGS=(--appendonly yes --appendfsync everysec)
start_fresh kvstore "$work/aof"
bench -P 1 -r 1000000 -n $((n / 10)) -t set,incr,lpush,hset
bench -P 16 -r 1000000 -n "$n" -t set
redis-cli -p "$port" bgrewriteaof >/dev/null
bench -P 16 -r 1000000 -n $((n / 4)) -t set
redis-cli -p "$port" config set appendfsync always >/dev/null
bench -P 1 -r 1000000 -n $((n / 100)) -t set
stop
# The restart replays the AOF.
start kvstore "$work/aof" "$port"
wait_ping "$port"
stop

SERVER_ARGS=()
start_fresh kvstore "$work/rdb"
bench -P 16 -r 2000000 -n "$n" -d 100 -t set,lpush,sadd,hset,zadd
redis-cli -p "$port" bgsave >/dev/null
bench -P 16 -r 2000000 -n $((n / 4)) -d 100 -t set
# The BGSAVE ends before SAVE (which a running one would refuse); a server
# that died meanwhile ends the script instead of the wait.
until [[ $(info_field "$port" persistence rdb_bgsave_in_progress) == 0 ]]; do
    kill -0 "$pid" || exit 1
    sleep 0.1
done
redis-cli -p "$port" save >/dev/null
stop
start kvstore "$work/rdb" "$port"
wait_ping "$port"
stop

# The profile's path stays the same from run to run too (rustc names it in
# its dep-info, so a new profile rebuilds; a new path would add a whole
# second set of artifacts to target/pgo-use each run).
mkdir -p target/pgo
"$profdata" merge -o target/pgo/kvstore.profdata "$raw"/*.profraw

echo "build-pgo: building the profile-guided server" >&2
RUSTFLAGS="-Cprofile-use=$PWD/target/pgo/kvstore.profdata" CARGO_TARGET_DIR=target/pgo-use \
    cargo build --release >&2
cp target/pgo-use/release/kvstore target/pgo/kvstore
echo "build-pgo: target/pgo/kvstore" >&2
