#!/usr/bin/env bash
# Benchmark kvstore against redis-server, side by side.
#
# Usage: scripts/bench.sh            (from any directory)
#
# Phases
#   throughput  redis-benchmark (-c clients, -P pipeline, -t test, --csv)
#               against both servers, interleaved per test+pipeline; also
#               server CPU per request from /proc/PID/stat (utime+stime).
#   memory      fresh servers, N keys (16-byte keys, 16-byte values) loaded via
#               `redis-cli --pipe`; bytes per key from INFO memory
#               (used_memory_rss, used_memory) and /proc/PID/status VmRSS.
#
# Markdown report goes to stdout, progress/log lines to stderr, so
#   scripts/bench.sh > bench.md
# keeps the report clean.
#
# Environment (all optional)
#   KVSTORE_BIN            kvstore binary (default: <repo>/target/release/kvstore,
#                          rebuilt with `cargo build --release` first, so the
#                          revision in the header is the one measured)
#   BENCH_ROUNDS           rounds per cell, alternating which server goes
#                          first; the table shows medians and the spread
#                          (default: 3)
#   BENCH_KEYSPACE         redis-benchmark -r: keys (and members) are drawn
#                          from this many random values (default: 1000000)
#   REDIS_BIN              redis-server binary (default: redis-server)
#   BENCH_TESTS            comma/space separated redis-benchmark -t names
#                          (default: set,get,incr,mset)
#   BENCH_PIPELINES        space/comma separated pipeline depths (default: "1 16")
#   BENCH_CLIENTS          redis-benchmark -c (default: 50)
#   BENCH_REQUESTS         -n for every pipeline depth (default: 200000 for P1,
#                          3000000 otherwise: each cell runs 2 s or more, so
#                          the 10 ms CPU tick is under 1% of it)
#   BENCH_REQUESTS_P<k>    -n for pipeline depth k, e.g. BENCH_REQUESTS_P1,
#                          BENCH_REQUESTS_P16 (beats BENCH_REQUESTS)
#   BENCH_MEM_SIZES        key counts for the memory phase
#                          (default: "1000000 1500000 3000000")
#   BENCH_SKIP_THROUGHPUT  1 = skip the throughput phase
#   BENCH_SKIP_MEM         1 = skip the memory phase
#   BENCH_SKIP_TYPES       1 = skip the data-type memory phase
#                              (BENCH_TYPE_KINDS: hashes list intset strset zset)
#   BENCH_SKIP_GROWTH      1 = skip the growth phase (keyspace grown to
#                              BENCH_GROWTH_KEYS, default 10000000, under load)
#   BENCH_RUN_TIMEOUT      seconds before one redis-benchmark / --pipe run is
#                          killed (default: 900)
#   BENCH_SETTLE           seconds to let memory stats settle (default: 1)
#   BENCH_START_TIMEOUT    seconds to wait for a server to answer PING (default: 30)
#   BENCH_SERVER_ARGS      extra options for both servers, e.g.
#                          "--appendonly yes --appendfsync always" (AOF figures)
#   KVSTORE_ARGS           extra options for kvstore only, e.g. "--io-engine epoll"

set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)
HELPER="$SCRIPT_DIR/bench_helper.py"
cd "$REPO_ROOT"

log() { printf '[bench %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { printf '[bench] ERROR: %s\n' "$*" >&2; exit 1; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_pos_int() { [[ $1 =~ ^[1-9][0-9]*$ ]]; }
is_number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------
REDIS_BIN=${REDIS_BIN:-redis-server}
BENCH_TESTS=${BENCH_TESTS:-set,get,incr,mset,lpush,lpop,sadd,spop,hset,zadd,zpopmin,lrange_100}
BENCH_PIPELINES=${BENCH_PIPELINES:-1 16}
BENCH_CLIENTS=${BENCH_CLIENTS:-50}
BENCH_MEM_SIZES=${BENCH_MEM_SIZES:-1000000 1500000 3000000}
BENCH_SKIP_THROUGHPUT=${BENCH_SKIP_THROUGHPUT:-0}
BENCH_SKIP_MEM=${BENCH_SKIP_MEM:-0}
BENCH_RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-900}
BENCH_SETTLE=${BENCH_SETTLE:-1}
BENCH_START_TIMEOUT=${BENCH_START_TIMEOUT:-30}
BENCH_ROUNDS=${BENCH_ROUNDS:-3}
BENCH_KEYSPACE=${BENCH_KEYSPACE:-1000000}

read -r -a TESTS <<<"${BENCH_TESTS//,/ }"
read -r -a PIPELINES <<<"${BENCH_PIPELINES//,/ }"
read -r -a MEM_SIZES <<<"${BENCH_MEM_SIZES//,/ }"

is_pos_int "$BENCH_ROUNDS" || die "BENCH_ROUNDS must be a positive integer, got '$BENCH_ROUNDS'"
is_pos_int "$BENCH_KEYSPACE" || die "BENCH_KEYSPACE must be a positive integer, got '$BENCH_KEYSPACE'"
is_pos_int "$BENCH_CLIENTS" || die "BENCH_CLIENTS must be a positive integer, got '$BENCH_CLIENTS'"
is_pos_int "$BENCH_RUN_TIMEOUT" || die "BENCH_RUN_TIMEOUT must be a positive integer, got '$BENCH_RUN_TIMEOUT'"
is_pos_int "$BENCH_START_TIMEOUT" || die "BENCH_START_TIMEOUT must be a positive integer, got '$BENCH_START_TIMEOUT'"
is_number "$BENCH_SETTLE" || die "BENCH_SETTLE must be a number of seconds, got '$BENCH_SETTLE'"
[[ $BENCH_SKIP_THROUGHPUT =~ ^[01]$ ]] || die "BENCH_SKIP_THROUGHPUT must be 0 or 1"
[[ $BENCH_SKIP_MEM =~ ^[01]$ ]] || die "BENCH_SKIP_MEM must be 0 or 1"
if [[ $BENCH_SKIP_THROUGHPUT == 0 ]]; then
    ((${#TESTS[@]} > 0)) || die "BENCH_TESTS is empty"
    ((${#PIPELINES[@]} > 0)) || die "BENCH_PIPELINES is empty"
    for t in "${TESTS[@]}"; do
        [[ $t =~ ^[A-Za-z0-9_]+$ ]] || die "bad test name '$t' in BENCH_TESTS"
    done
    for p in "${PIPELINES[@]}"; do
        is_pos_int "$p" || die "bad pipeline depth '$p' in BENCH_PIPELINES"
    done
fi
if [[ $BENCH_SKIP_MEM == 0 ]]; then
    ((${#MEM_SIZES[@]} > 0)) || die "BENCH_MEM_SIZES is empty"
    for s in "${MEM_SIZES[@]}"; do
        is_pos_int "$s" || die "bad key count '$s' in BENCH_MEM_SIZES"
    done
fi

# requests_for PIPE: -n for a pipeline depth.
requests_for() {
    local pipe=$1 var="BENCH_REQUESTS_P$1" n
    if [[ -n ${!var:-} ]]; then
        n=${!var}
    elif [[ -n ${BENCH_REQUESTS:-} ]]; then
        n=$BENCH_REQUESTS
    elif ((pipe == 1)); then
        n=200000
    else
        n=3000000
    fi
    is_pos_int "$n" || die "request count for pipeline $pipe must be a positive integer, got '$n'"
    printf '%s\n' "$n"
}

# ---------------------------------------------------------------------------
# tools and binaries
# ---------------------------------------------------------------------------
for tool in redis-benchmark redis-cli python3 timeout awk; do
    command -v "$tool" >/dev/null || die "'$tool' not found in PATH (redis-tools / python3 / coreutils needed)"
done
[[ -f $HELPER ]] || die "helper script missing: $HELPER"

resolve_bin() { # NAME VALUE -> absolute path of an executable
    local name=$1 val=$2 path
    if [[ $val == */* ]]; then
        path=$val
    else
        path=$(command -v -- "$val") || die "$name '$val' not found in PATH"
    fi
    [[ -f $path && -x $path ]] || die "$name '$path' is not an executable file"
    printf '%s\n' "$(cd -- "$(dirname -- "$path")" && pwd)/$(basename -- "$path")"
}

if [[ -n ${KVSTORE_BIN:-} ]]; then
    KVSTORE_BIN=$(resolve_bin KVSTORE_BIN "$KVSTORE_BIN")
else
    KVSTORE_BIN="$REPO_ROOT/target/release/kvstore"
    # Always (re)build: a no-op when nothing changed, and otherwise the
    # binary measured is the tree the header names.
    command -v cargo >/dev/null || die "cargo not found (set KVSTORE_BIN to measure a given binary)"
    log "cargo build --release"
    cargo build --release >&2 || die "cargo build --release failed"
    [[ -x $KVSTORE_BIN ]] || die "cargo build succeeded but $KVSTORE_BIN does not exist"
fi
REDIS_BIN=$(resolve_bin REDIS_BIN "$REDIS_BIN")

# ---------------------------------------------------------------------------
# process bookkeeping and cleanup
# ---------------------------------------------------------------------------
CLEANUP_PIDS=()
CLEANUP_DIRS=()

forget_pid() {
    local p keep=()
    for p in ${CLEANUP_PIDS[@]+"${CLEANUP_PIDS[@]}"}; do
        [[ $p == "$1" ]] || keep+=("$p")
    done
    CLEANUP_PIDS=(${keep[@]+"${keep[@]}"})
}

# proc_running PID: true if PID exists and is not a zombie (kill -0 succeeds
# on an unreaped zombie child, so it cannot be used here).
proc_running() {
    local st rest
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || return 1
    rest=${st##*) }
    [[ ${rest%% *} != [ZX] ]]
}

# stop_pid PID: TERM, wait up to 10 s, then KILL; reap.
stop_pid() {
    local pid=$1 i
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true # in case it was stopped
    for ((i = 0; i < 100; i++)); do
        proc_running "$pid" || break
        sleep 0.1
    done
    if proc_running "$pid"; then
        log "pid $pid ignored SIGTERM; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
    forget_pid "$pid"
}

cleanup() {
    local rc=$? p d
    trap - EXIT INT TERM
    for p in ${CLEANUP_PIDS[@]+"${CLEANUP_PIDS[@]}"}; do
        stop_pid "$p"
    done
    for d in ${CLEANUP_DIRS[@]+"${CLEANUP_DIRS[@]}"}; do
        rm -rf -- "$d"
    done
    exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

WORK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/kvbench-work.XXXXXX")
CLEANUP_DIRS+=("$WORK_DIR")

# ---------------------------------------------------------------------------
# server helpers
# ---------------------------------------------------------------------------
rcli() { # PORT ARGS...
    local port=$1
    shift
    timeout 30 redis-cli -h 127.0.0.1 -p "$port" "$@"
}

# start_server NAME BIN -> sets SRV_PID SRV_PORT SRV_DIR
start_server() {
    local name=$1 bin=$2 attempt port dir pid i args extra
    for attempt in 1 2 3; do
        port=$(python3 "$HELPER" free-ports 1) || die "could not pick a free port"
        dir=$(mktemp -d "${TMPDIR:-/tmp}/kvbench-$name.XXXXXX")
        CLEANUP_DIRS+=("$dir")
        args=(--port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir")
        # Extra settings for both servers, e.g. "--appendonly yes --appendfsync always".
        if [[ -n ${BENCH_SERVER_ARGS:-} ]]; then
            read -r -a extra <<<"$BENCH_SERVER_ARGS"
            args+=("${extra[@]}")
        fi
        # Settings for kvstore alone, e.g. "--io-engine epoll".
        if [[ $name != redis && -n ${KVSTORE_ARGS:-} ]]; then
            read -r -a extra <<<"$KVSTORE_ARGS"
            args+=("${extra[@]}")
        fi
        [[ $name == redis ]] && args+=(--daemonize no)
        "$bin" "${args[@]}" >"$dir/server.log" 2>&1 </dev/null &
        pid=$!
        CLEANUP_PIDS+=("$pid")
        for ((i = 0; i < BENCH_START_TIMEOUT * 10; i++)); do
            proc_running "$pid" || break
            if [[ $(timeout 2 redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; then
                SRV_PID=$pid SRV_PORT=$port SRV_DIR=$dir
                log "$name started: pid $pid, port $port, dir $dir"
                return 0
            fi
            sleep 0.1
        done
        if proc_running "$pid"; then
            log "$name log tail:"
            tail -n 20 "$dir/server.log" >&2 || true
            die "$name (pid $pid, port $port) did not answer PING within ${BENCH_START_TIMEOUT}s"
        fi
        wait "$pid" 2>/dev/null || true
        forget_pid "$pid"
        log "$name exited during startup (attempt $attempt, port $port); log tail:"
        tail -n 20 "$dir/server.log" >&2 || true
    done
    die "could not start $name ($bin)"
}

stop_server() { # NAME PID
    log "stopping $1 (pid $2)"
    stop_pid "$2"
}

require_alive() { # NAME PID DIR CONTEXT
    if ! proc_running "$2"; then
        log "$1 log tail:"
        tail -n 20 "$3/server.log" >&2 || true
        die "$1 (pid $2) died $4"
    fi
}

# cpu_ticks PID -> sets CPU_U CPU_S (utime/stime, fields 14/15 of /proc/PID/stat)
cpu_ticks() {
    local st rest f
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || die "cannot read /proc/$1/stat (server gone?)"
    rest=${st##*) } # fields 3.. (comm may contain spaces)
    read -r -a f <<<"$rest"
    CPU_U=${f[11]} CPU_S=${f[12]}
}

info_field() { # PORT FIELD -> value or empty
    local out
    out=$(rcli "$1" info memory) || die "INFO memory failed on port $1"
    printf '%s\n' "$out" | tr -d '\r' | awk -F: -v k="$2" '$1 == k { print $2; exit }'
}

proc_rss_bytes() { # PID
    awk '$1 == "VmRSS:" { print $2 * 1024; exit }' "/proc/$1/status" 2>/dev/null ||
        die "cannot read /proc/$1/status"
}

# run_watched NAME SPID SDIR STDIN STDOUT STDERR CMD...
# Runs CMD (under timeout) in the background and polls: fails fast if the
# server dies or redis-benchmark reports it cannot connect (it busy-loops
# forever in that case instead of exiting).
run_watched() {
    local name=$1 spid=$2 sdir=$3 in=$4 out=$5 err=$6 bpid rc=0
    shift 6
    timeout "$BENCH_RUN_TIMEOUT" "$@" <"$in" >"$out" 2>"$err" &
    bpid=$!
    CLEANUP_PIDS+=("$bpid")
    while proc_running "$bpid"; do
        if ! proc_running "$spid"; then
            stop_pid "$bpid"
            require_alive "$name" "$spid" "$sdir" "while running: $*"
        fi
        if grep -q -e 'Could not connect' -e '^Error' "$err" 2>/dev/null; then
            stop_pid "$bpid"
            cat "$err" >&2
            die "$name: client error while running: $*"
        fi
        sleep 0.2
    done
    wait "$bpid" || rc=$?
    forget_pid "$bpid"
    require_alive "$name" "$spid" "$sdir" "while running: $*"
    if ((rc != 0)); then
        cat "$err" >&2 || true
        ((rc == 124)) && die "$name: timed out after ${BENCH_RUN_TIMEOUT}s: $*"
        die "$name: command failed (exit $rc): $*"
    fi
}

# ---------------------------------------------------------------------------
# header
# ---------------------------------------------------------------------------
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
kv_desc="$KVSTORE_BIN"
if kv_mtime=$(date -r "$KVSTORE_BIN" '+%Y-%m-%d %H:%M:%S' 2>/dev/null); then
    kv_desc+=" (built $kv_mtime)"
fi
if git_rev=$(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null); then
    [[ -n $(git -C "$REPO_ROOT" status --porcelain 2>/dev/null) ]] && git_rev+="-dirty"
else
    git_rev="(no commits)"
fi

echo "# kvstore vs redis benchmark"
echo
echo "- date: $(date '+%Y-%m-%d %H:%M:%S %Z')"
echo "- machine: $(nproc) CPUs, ${cpu_model:-unknown CPU}, kernel $(uname -r)"
echo "- kvstore: $kv_desc, repo $git_rev"
echo "- redis: $REDIS_BIN: $("$REDIS_BIN" --version 2>&1 | head -n 1)"
echo "- client: $(redis-benchmark --version 2>&1 | head -n 1), $(redis-cli --version 2>&1 | head -n 1)"
echo "- server flags: --bind 127.0.0.1 --save \"\" --appendonly no (fresh temp dir each)"
echo

# ---------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------
if [[ $BENCH_SKIP_THROUGHPUT == 0 ]]; then
    req_desc=()
    for p in "${PIPELINES[@]}"; do
        req_desc+=("P$p: $(requests_for "$p")")
    done
    log "throughput phase: tests=${TESTS[*]} pipelines=${PIPELINES[*]} clients=$BENCH_CLIENTS"

    start_server kvstore "$KVSTORE_BIN"
    KV_PID=$SRV_PID KV_PORT=$SRV_PORT KV_DIR=$SRV_DIR
    start_server redis "$REDIS_BIN"
    RD_PID=$SRV_PID RD_PORT=$SRV_PORT RD_DIR=$SRV_DIR

    TP_RECORDS="$WORK_DIR/throughput.tsv"
    : >"$TP_RECORDS"
    for ((round = 1; round <= BENCH_ROUNDS; round++)); do
        # Alternate which server goes first, so neither always runs on a
        # machine the other has just warmed (or heated).
        if ((round % 2)); then sides=(kvstore redis); else sides=(redis kvstore); fi
        for t in "${TESTS[@]}"; do
            for p in "${PIPELINES[@]}"; do
                n=$(requests_for "$p")
                for side in "${sides[@]}"; do
                    if [[ $side == kvstore ]]; then
                        pid=$KV_PID port=$KV_PORT dir=$KV_DIR
                    else
                        pid=$RD_PID port=$RD_PORT dir=$RD_DIR
                    fi
                    # Pops measure pops, not empty replies: fill first (not
                    # measured) with twice as many pushes as there will be pops.
                    fill=""
                    case $t in
                    spop) fill=sadd ;;
                    zpopmin | zpopmax) fill=zadd ;;
                    lpop | rpop) fill=lpush ;;
                    esac
                    if [[ -n $fill ]]; then
                        run_watched "$side" "$pid" "$dir" /dev/null /dev/null /dev/null \
                            redis-benchmark -h 127.0.0.1 -p "$port" -c "$BENCH_CLIENTS" \
                            -P 16 -t "$fill" -n $((2 * n)) -r 100000000 --csv
                    fi
                    csv="$WORK_DIR/tp-$t-P$p-$side-r$round.csv"
                    log "round $round/$BENCH_ROUNDS $side: -t $t -P $p -n $n -c $BENCH_CLIENTS -r $BENCH_KEYSPACE"
                    require_alive "$side" "$pid" "$dir" "before -t $t -P $p"
                    cpu_ticks "$pid"
                    u0=$CPU_U s0=$CPU_S
                    run_watched "$side" "$pid" "$dir" /dev/null "$csv" "$csv.err" \
                        redis-benchmark -h 127.0.0.1 -p "$port" -c "$BENCH_CLIENTS" \
                        -P "$p" -t "$t" -n "$n" -r "$BENCH_KEYSPACE" --csv
                    cpu_ticks "$pid"
                    du=$((CPU_U - u0)) ds=$((CPU_S - s0))
                    rows=$(python3 "$HELPER" check-csv "$csv") ||
                        die "$side: bad redis-benchmark output for -t $t -P $p (stderr: $(head -c 500 "$csv.err"))"
                    log "$side: $(tail -n +2 "$csv" | head -n 1) [rows=$rows, cpu ticks usr=$du sys=$ds]"
                    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$p" "$side" "$n" "$du" "$ds" "$csv" >>"$TP_RECORDS"
                done
            done
        done
    done
    stop_server kvstore "$KV_PID"
    stop_server redis "$RD_PID"

    echo "## Throughput"
    echo
    echo "redis-benchmark -c $BENCH_CLIENTS -r $BENCH_KEYSPACE, requests per run: ${req_desc[*]}; $BENCH_ROUNDS rounds, kvstore and redis interleaved, alternating which goes first; pops run on sets/lists filled first. Medians, with the min–max spread over rounds in brackets."
    echo
    python3 "$HELPER" throughput-table "$TP_RECORDS" || die "could not render throughput table"
    echo
fi

# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------
# measure_mem NAME BIN N RESPFILE RECORDS
measure_mem() {
    local name=$1 bin=$2 n=$3 resp=$4 records=$5
    local pid port dir rss0 rss1 used0 used1 proc0 proc1 dbsize out
    start_server "$name" "$bin"
    pid=$SRV_PID port=$SRV_PORT dir=$SRV_DIR
    sleep "$BENCH_SETTLE"
    rss0=$(info_field "$port" used_memory_rss)
    used0=$(info_field "$port" used_memory)
    proc0=$(proc_rss_bytes "$pid")
    log "$name: loading $n keys via redis-cli --pipe"
    out="$WORK_DIR/pipe-$name-$n.out"
    run_watched "$name" "$pid" "$dir" "$resp" "$out" "$out.err" \
        redis-cli -h 127.0.0.1 -p "$port" --pipe
    grep -q "errors: 0, replies: $n\$" <(tr -d '\r' <"$out") ||
        die "$name: redis-cli --pipe did not report 'errors: 0, replies: $n': $(tr '\n' ' ' <"$out")"
    sleep "$BENCH_SETTLE"
    require_alive "$name" "$pid" "$dir" "after loading $n keys"
    rss1=$(info_field "$port" used_memory_rss)
    used1=$(info_field "$port" used_memory)
    proc1=$(proc_rss_bytes "$pid")
    dbsize=$(rcli "$port" dbsize | tr -d '\r') || die "$name: DBSIZE failed"
    [[ $dbsize == "$n" ]] || die "$name: DBSIZE is '$dbsize' after loading $n keys"
    local v
    for v in "$rss0" "$rss1" "$used0" "$used1"; do
        [[ -z $v ]] || is_uint "$v" || die "$name: non-numeric INFO memory value '$v'"
    done
    [[ -n $rss0 && -n $rss1 ]] || { rss0="" rss1=""; log "$name: INFO has no used_memory_rss"; }
    [[ -n $used0 && -n $used1 ]] || { used0="" used1=""; log "$name: INFO has no used_memory"; }
    log "$name: $n keys: used_memory_rss $rss0 -> $rss1, used_memory $used0 -> $used1, VmRSS $proc0 -> $proc1"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$name" "$rss0" "$rss1" \
        "$used0" "$used1" "$proc0" "$proc1" >>"$records"
    stop_server "$name" "$pid"
}

if [[ $BENCH_SKIP_MEM == 0 ]]; then
    log "memory phase: sizes=${MEM_SIZES[*]}"
    MEM_RECORDS="$WORK_DIR/memory.tsv"
    : >"$MEM_RECORDS"
    for n in "${MEM_SIZES[@]}"; do
        resp="$WORK_DIR/load-$n.resp"
        log "generating RESP for $n SETs"
        gen_start=$SECONDS
        python3 "$HELPER" gen-resp "$n" "$resp" || die "RESP generation failed"
        log "generated $(stat -c %s "$resp") bytes in $((SECONDS - gen_start))s"
        measure_mem kvstore "$KVSTORE_BIN" "$n" "$resp" "$MEM_RECORDS"
        measure_mem redis "$REDIS_BIN" "$n" "$resp" "$MEM_RECORDS"
        rm -f -- "$resp"
    done

    echo "## Memory"
    echo
    python3 "$HELPER" memory-table "$MEM_RECORDS" || die "could not render memory table"
    echo
fi

# ---------------------------------------------------------------------------
# data types: resident memory of typical collections, side by side
# ---------------------------------------------------------------------------
BENCH_SKIP_TYPES=${BENCH_SKIP_TYPES:-0}
BENCH_TYPE_KINDS=${BENCH_TYPE_KINDS:-hashes list intset strset zset}
if [[ $BENCH_SKIP_TYPES == 0 ]]; then
    log "data-type memory phase: $BENCH_TYPE_KINDS"
    echo "## Data types: resident memory"
    echo
    echo "Each dataset is loaded into a fresh server with redis-cli --pipe; RSS and used_memory are"
    echo "read from INFO before and after. (a) 100,000 hashes of 10 small fields, (b) one list of 1M"
    echo "small items, (c) one set of 1M integers and one of 1M strings, (d) one sorted set of 1M members."
    echo
    echo "| dataset | kvstore RSS MB | redis RSS MB | RSS ratio | kvstore used_memory MB | redis used_memory MB | encoding (kv / redis) |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    for kind in $BENCH_TYPE_KINDS; do
        resp="$WORK_DIR/types-$kind.resp"
        read -r ncmds nkeys < <(python3 "$REPO_ROOT/scripts/gen_types.py" "$kind" "$resp") || die "gen_types $kind failed"
        declare -A rss=() used=() enc=()
        for side in kvstore redis; do
            if [[ $side == kvstore ]]; then bin=$KVSTORE_BIN; else bin=$REDIS_BIN; fi
            start_server "$side" "$bin"
            sleep "$BENCH_SETTLE"
            r0=$(info_field "$SRV_PORT" used_memory_rss)
            u0=$(info_field "$SRV_PORT" used_memory)
            out="$WORK_DIR/types-$kind-$side.out"
            run_watched "$side" "$SRV_PID" "$SRV_DIR" "$resp" "$out" "$out.err" \
                redis-cli -h 127.0.0.1 -p "$SRV_PORT" --pipe
            grep -q "errors: 0, replies: $ncmds\$" <(tr -d '\r' <"$out") ||
                die "$side: loading $kind: $(tr '\n' ' ' <"$out")"
            dbsize=$(rcli "$SRV_PORT" dbsize | tr -d '\r')
            [[ $dbsize == "$nkeys" ]] || die "$side: DBSIZE $dbsize after loading $kind, expected $nkeys"
            sleep "$BENCH_SETTLE"
            r1=$(info_field "$SRV_PORT" used_memory_rss)
            u1=$(info_field "$SRV_PORT" used_memory)
            somekey=$(rcli "$SRV_PORT" randomkey | tr -d '\r')
            enc[$side]=$(rcli "$SRV_PORT" object encoding "$somekey" | tr -d '\r')
            rss[$side]=$((r1 - r0))
            used[$side]=$((u1 - u0))
            stop_server "$side" "$SRV_PID"
        done
        rm -f -- "$resp"
        python3 - "$kind" "${rss[kvstore]}" "${rss[redis]}" "${used[kvstore]}" "${used[redis]}" "${enc[kvstore]}" "${enc[redis]}" <<'PY'
import sys
k, rk, rr, uk, ur, ek, er = sys.argv[1:]
mb = lambda b: "%.1f" % (int(b) / 1048576)
ratio = "%.2f" % (int(rk) / int(rr)) if int(rr) else "-"
print(f"| {k} | {mb(rk)} | {mb(rr)} | {ratio} | {mb(uk)} | {mb(ur)} | {ek} / {er} |")
PY
        unset rss used enc
    done
    echo
fi

# ---------------------------------------------------------------------------
# growth: the keyspace grows to ~BENCH_GROWTH_KEYS keys under load; a table
# resize that stalls shows up as the worst-case latency of this run.
# ---------------------------------------------------------------------------
BENCH_SKIP_GROWTH=${BENCH_SKIP_GROWTH:-0}
BENCH_GROWTH_KEYS=${BENCH_GROWTH_KEYS:-10000000}
if [[ $BENCH_SKIP_GROWTH == 0 ]]; then
    log "growth phase: $BENCH_GROWTH_KEYS SETs of random keys"
    echo "## Growth to ~$BENCH_GROWTH_KEYS keys"
    echo
    echo "redis-benchmark -t set -r 1000000000 -n $BENCH_GROWTH_KEYS -P 16 -c 50 on a fresh server: the"
    echo "worst request latency includes any stall while the keyspace table resizes."
    echo
    echo "| server | keys at end | rps | p50 ms | p99 ms | max ms |"
    echo "| --- | --- | --- | --- | --- | --- |"
    for side in kvstore redis; do
        if [[ $side == kvstore ]]; then bin=$KVSTORE_BIN; else bin=$REDIS_BIN; fi
        start_server "$side" "$bin"
        csv="$WORK_DIR/growth-$side.csv"
        run_watched "$side" "$SRV_PID" "$SRV_DIR" /dev/null "$csv" "$csv.err" \
            redis-benchmark -h 127.0.0.1 -p "$SRV_PORT" -c 50 -P 16 -t set \
            -r 1000000000 -n "$BENCH_GROWTH_KEYS" --csv
        keys=$(rcli "$SRV_PORT" dbsize | tr -d '\r')
        # "test","rps","avg","min","p50","p95","p99","max"
        row=$(tail -n 1 "$csv" | tr -d '"')
        IFS=, read -r _ rps _ _ p50 _ p99 max <<<"$row"
        echo "| $side | $keys | ${rps%.*} | $p50 | $p99 | $max |"
        stop_server "$side" "$SRV_PID"
    done
    echo
fi

log "done"
