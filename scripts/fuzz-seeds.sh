#!/usr/bin/env bash
# Seed corpora for the fuzz targets that read Redis's formats: a
# redis-server 7.0 gets every type in its small and its large encodings
# (strings raw, int and LZF-compressed, lists of one node and of several,
# sets as intset, listpack and hashtable, sorted sets, hashes, a stream
# with a consumer group and a pending entry, an HLL, a function library, a
# second database, a TTL), then each key's DUMP payload goes to
# fuzz/corpus/restore_payload/ (twice: after a 0 byte and after a 1, the
# target's choice of limits), the dump file to fuzz/corpus/rdb_loader/
# beside the fixtures in tests/fixtures/rdb, and its AOF manifest and
# command log (appendonly from the start, so every command is in it) to
# fuzz/corpus/aof_reader/.
#
# Usage: scripts/fuzz-seeds.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/server-helpers.sh

dir=$(mktemp -d)
pid=
cleanup() { [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
mkdir -p fuzz/corpus/restore_payload fuzz/corpus/rdb_loader fuzz/corpus/aof_reader
port=$(free_port)
redis-server --port "$port" --dir "$dir" --save "" --enable-debug-command yes \
    --appendonly yes --aof-timestamp-enabled yes \
    >"$dir/redis.log" 2>&1 &
pid=$!
wait_ping "$port"
cli() { redis-cli -p "$port" "$@" >/dev/null; }

cli set str hello
cli set int 1234567
cli expireat int 4102444800
cli set long "$(head -c 400 /dev/zero | tr '\0' a)"
cli rpush list a b 1 2
cli rpush quicklist $(seq 1 300)
cli config set list-max-listpack-size 4
cli rpush nodes $(seq 1 20)
cli sadd intset 1 2 3
cli sadd smallset a b c
cli sadd bigset $(seq 1 600)
cli zadd zset 1 a 2.5 b
cli zadd skiplist $(for i in $(seq 1 150); do echo "$i.5 m$i"; done)
cli hset hash a 1 b 2
cli hset bighash $(for i in $(seq 1 600); do echo "f$i v$i"; done)
cli xadd stream 1-1 a 1
cli xadd stream 2-1 b 2 c 3
cli xgroup create stream g 0
cli xreadgroup group g c1 count 1 streams stream '>'
cli pfadd hll $(seq 1 300)
cli function load "#!lua name=seedlib
redis.register_function('f', function() return 1 end)"
cli -n 3 set other db

for key in str int long list quicklist nodes intset smallset bigset zset skiplist hash bighash stream hll; do
    # --raw ends the payload with a newline of its own. The target's first
    # byte picks the encoding limits: Redis's defaults (0) or tiny ones (1).
    redis-cli -p "$port" --raw dump "$key" | head -c -1 >"$dir/payload"
    for limits in 0 1; do
        { printf "\\$limits"; cat "$dir/payload"; } >"fuzz/corpus/restore_payload/$key-$limits"
    done
done
cli save
cp "$dir/dump.rdb" fuzz/corpus/rdb_loader/redis-every-encoding.rdb
cp tests/fixtures/rdb/*.rdb fuzz/corpus/rdb_loader/
# The AOF: its manifest, and the commands above as a command log (with
# MULTI/EXEC from a transaction and #TS annotations).
printf 'MULTI\nINCR counter\nLPUSH list c\nEXEC\n' | redis-cli -p "$port" >/dev/null
redis-cli -p "$port" eval "redis.call('set', KEYS[1], ARGV[1]) redis.call('pexpire', KEYS[1], 100000)" 1 scripted v >/dev/null
cp "$dir"/appendonlydir/appendonly.aof.manifest fuzz/corpus/aof_reader/manifest
cp "$dir"/appendonlydir/appendonly.aof.*.incr.aof fuzz/corpus/aof_reader/incr.aof
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" 2>/dev/null || true
pid=
echo "seeds: $(ls fuzz/corpus/restore_payload | wc -l) payloads, $(ls fuzz/corpus/rdb_loader | wc -l) dumps, $(ls fuzz/corpus/aof_reader | wc -l) AOF files"
