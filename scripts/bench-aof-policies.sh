#!/usr/bin/env bash
# What the AOF costs: SET of random keys (-r 1000000) with redis-benchmark
# (50 clients unless BENCH_CLIENTS) at pipelines of 1 and 16, AOF off and
# under each appendfsync policy in POLICIES, kvstore beside redis-server.
# Every cell starts a fresh server in a fresh directory (so each writes an
# AOF of the same length, with the same automatic rewrites: the defaults,
# unless EXTRA_ARGS adds e.g. --auto-aof-rewrite-percentage 0). In each
# round the cells of one pipeline run back to back (policy after policy,
# the server that goes first alternating), and a policy's throughput is
# also recorded as a share of the same round's AOF-off run, so the cost
# compares runs seconds apart on this noisy machine. ROUNDS rounds
# (default 5); medians [min–max].
#
# Usage: scripts/bench-aof-policies.sh  (POLICIES="everysec" ROUNDS=5
#        P1_REQUESTS=200000 P16_REQUESTS=3000000 EXTRA_ARGS=)
set -euo pipefail
cd "$(dirname "$0")/.."
POLICIES=${POLICIES:-everysec}
ROUNDS=${ROUNDS:-5}
P1_REQUESTS=${P1_REQUESTS:-200000}
P16_REQUESTS=${P16_REQUESTS:-3000000}
EXTRA_ARGS=${EXTRA_ARGS:-}
read -r -a EXTRA <<<"$EXTRA_ARGS"
source scripts/bench-common.sh

# cell SIDE POLICY P N: one fresh server, one measured run.
cell() {
    local side=$1 policy=$2 p=$3 n=$4 dir="$work/cell"
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    case $policy in
        off) SERVER_ARGS=(--appendonly no) ;;
        *) SERVER_ARGS=(--appendonly yes --appendfsync "$policy") ;;
    esac
    SERVER_ARGS+=(${EXTRA[@]+"${EXTRA[@]}"})
    start "$side" "$dir" "$port"
    wait_ping "$port"
    measure "$side" "${policy}_p${p}" "$n" "$p" -r 1000000 -t set
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

# latest SIDE KEY: the value last recorded for SIDE under KEY.
latest() { awk -F'\t' -v s="$1" -v k="$2" '$1 == s && $2 == k { v = $3 } END { print v }' "$results"; }

SIDES=(kvstore redis)
for ((round = 1; round <= ROUNDS; round++)); do
    for p in 1 16; do
        n=$P1_REQUESTS
        [[ $p == 16 ]] && n=$P16_REQUESTS
        for ((i = 0; i < ${#SIDES[@]}; i++)); do
            side=${SIDES[$(((i + round - 1) % ${#SIDES[@]}))]}
            echo "round $round/$ROUNDS: P$p $side" >&2
            cell "$side" off "$p" "$n"
            off=$(latest "$side" "off_p${p}_rps")
            for policy in $POLICIES; do
                cell "$side" "$policy" "$p" "$n"
                got=$(latest "$side" "${policy}_p${p}_rps")
                record "$side" "${policy}_p${p}_share" "$(echo "100 * $got / $off" | bc -l)"
            done
        done
    done
done

rows=()
for p in 1 16; do
    rows+=("SET P$p, AOF off: requests/s|off_p${p}_rps|,.0f"
        "SET P$p, AOF off: server CPU µs/request|off_p${p}_cpu|.3f")
    for policy in $POLICIES; do
        rows+=("SET P$p, $policy: requests/s|${policy}_p${p}_rps|,.0f"
            "SET P$p, $policy: % of the round's AOF-off requests/s|${policy}_p${p}_share|.1f"
            "SET P$p, $policy: server CPU µs/request|${policy}_p${p}_cpu|.3f")
    done
done
python3 "$HELPER" sides-table "$results" \
    "AOF policies, ${BENCH_CLIENTS:-50} clients, a fresh server per run${EXTRA_ARGS:+ ($EXTRA_ARGS)}, median of $ROUNDS rounds [min–max]" \
    "kvstore,redis" "${rows[@]}"
