#!/usr/bin/env bash
# What ACL checks cost, kvstore beside redis-server: redis-benchmark SET and
# GET (50 clients, P=1 and P=16, random keys key:NNNNNNNNNNNN) run as
#   - open: the default user (no rules: nothing is checked), and
#   - acl:  user u500 of USERS users, each with PATTERNS key patterns; the
#           PATTERNS-1 first ones share the keys' prefix and fail on a later
#           character (key:000x*, key:001x*, …), the last (key:*) matches,
#           so every command is matched against every pattern.
# For each: requests/s and the server's CPU µs per request (user+sys from
# /proc). The second table is each server's CPU with ACL rules over its CPU
# without (issue 14's goal for kvstore: at most 1.1).
# ROUNDS rounds (default 3), interleaved, alternating who goes first; medians
# with the min–max spread.
#
# Usage: scripts/bench-acl.sh  (REQUESTS_P1=300000 REQUESTS_P16=3000000 USERS=1000 PATTERNS=100 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS_P1=${REQUESTS_P1:-300000}
REQUESTS_P16=${REQUESTS_P16:-3000000}
USERS=${USERS:-1000}
PATTERNS=${PATTERNS:-100}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)

# The ACL SETUSER commands, one line each.
python3 - "$USERS" "$PATTERNS" >"$work/users.txt" <<'PY'
import sys
users, patterns = int(sys.argv[1]), int(sys.argv[2])
for u in range(users):
    pats = " ".join(f"~key:{i:03d}x*" for i in range(patterns - 1))
    print(f"ACL SETUSER u{u} on >pw{u} +@all &* {pats} ~key:*")
PY

run_side() { # SIDE
    local side=$1 dir="$work/$1" p t n
    start_fresh "$side" "$dir"
    redis-cli -p "$port" <"$work/users.txt" | grep -v '^OK$' && { echo "$side: ACL SETUSER failed" >&2; exit 1; }
    [[ $(redis-cli -p "$port" acl dryrun u500 set key:000000000001 v) == OK ]] ||
        { echo "$side: u500 may not SET" >&2; exit 1; }
    [[ $(redis-cli -p "$port" acl dryrun u500 set other v) != OK ]] ||
        { echo "$side: u500 may touch any key" >&2; exit 1; }
    for p in 1 16; do
        n=$REQUESTS_P1
        ((p == 16)) && n=$REQUESTS_P16
        for t in set get; do
            measure "$side" "${t}_p${p}_open" "$n" "$p" -r 1000000 -t "$t"
            measure "$side" "${t}_p${p}_acl" "$n" "$p" -r 1000000 --user u500 -a pw500 -t "$t"
        done
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

rows=()
for p in 1 16; do
    for t in set get; do
        T=${t^^}
        rows+=("$T P$p requests/s, default user|${t}_p${p}_open_rps|,.0f")
        rows+=("$T P$p requests/s, user with $PATTERNS patterns|${t}_p${p}_acl_rps|,.0f")
        rows+=("$T P$p server CPU µs/request, default user|${t}_p${p}_open_cpu|.3f")
        rows+=("$T P$p server CPU µs/request, user with $PATTERNS patterns|${t}_p${p}_acl_cpu|.3f")
    done
done
python3 "$HELPER" side-table "$results" \
    "ACL checks, $USERS users × $PATTERNS key patterns, 50 clients, median of $ROUNDS rounds [min–max]" \
    "${rows[@]}"

# Each server against itself: CPU per request with the rules over without.
python3 - "$results" <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    side, name, value = line.rstrip("\n").split("\t")
    vals.setdefault((side, name), []).append(float(value))
print()
print("| CPU with ACL rules / without | kvstore | redis |")
print("| --- | --- | --- |")
for p in (1, 16):
    for t in ("set", "get"):
        cells = []
        for side in ("kvstore", "redis"):
            acl = statistics.median(vals[(side, f"{t}_p{p}_acl_cpu")])
            open_ = statistics.median(vals[(side, f"{t}_p{p}_open_cpu")])
            cells.append(f"{acl / open_:.2f}" if open_ else "-")
        print(f"| {t.upper()} P{p} | {cells[0]} | {cells[1]} |")
PY
