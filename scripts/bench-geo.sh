#!/usr/bin/env bash
# Side-by-side geo benchmark, kvstore against redis-server, with
# redis-benchmark (50 clients):
#   - POINTS random points (uniform in longitude and latitude, the same
#     seed for both servers) loaded into one key with GEOADD through
#     redis-cli --pipe: load time and bytes per point;
#   - GEOSEARCH FROMLONLAT x y BYRADIUS RADIUS km on that key (a few hundred
#     matches), the centre random in [0, 2)° × [0, 2)° each call (a
#     redis-benchmark __rand_int__ below 2·10^9 written "NNN…e-9"),
#     unsorted, and with COUNT 10 ASC: calls/s and the server's CPU µs per
#     call (user+sys from /proc);
#   - GEOADD of one random point (in [0, 1)° × [0, 1)°) onto a fresh key at pipelines of 1 and 16:
#     requests/s and CPU µs per request.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; the
# table shows medians with the min–max spread.
#
# Usage: scripts/bench-geo.sh  (POINTS=1000000 SEARCHES=20000 REQUESTS=500000
#        RADIUS=250 ROUNDS=3; KVSTORE_BIN=... to skip the build)
set -euo pipefail
cd "$(dirname "$0")/.."
POINTS=${POINTS:-1000000}
SEARCHES=${SEARCHES:-20000}
REQUESTS=${REQUESTS:-500000}
RADIUS=${RADIUS:-250}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

SERVER_ARGS=(--appendonly no)


# The points, once for all rounds: GEOADD pts with 1000 points a command.
points_file="$work/points.resp"
python3 - "$POINTS" "$points_file" <<'PY'
import random, sys
n, path = int(sys.argv[1]), sys.argv[2]
rng = random.Random(7)
def resp(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)
with open(path, "wb") as f:
    for start in range(0, n, 1000):
        args = [b"GEOADD", b"pts"]
        for i in range(start, min(n, start + 1000)):
            args += [b"%.6f" % rng.uniform(-180, 180), b"%.6f" % rng.uniform(-85, 85), b"p:%d" % i]
        f.write(resp(args))
PY

# A search around a random centre: __rand_int__ is 12 zero-padded digits
# below -r, so "__rand_int__e-9" is a degree count in [0, 2).
search=(-r 2000000000 geosearch pts fromlonlat __rand_int__e-9 __rand_int__e-9 byradius "$RADIUS" km)

run_side() { # SIDE
    local side=$1 dir="$work/$1" port c0 c1 p rps m0 m1 t0 t1 n
    start_fresh "$side" "$dir"
    m0=$(info_field "$port" memory used_memory)
    t0=$(now)
    redis-cli -p "$port" --pipe <"$points_file" >/dev/null
    t1=$(now)
    n=$(redis-cli -p "$port" zcard pts)
    [[ $n == "$POINTS" ]] || { echo "$side: $n points loaded, not $POINTS" >&2; exit 1; }
    m1=$(info_field "$port" memory used_memory)
    record "$side" "load_s" "$(echo "$t1 - $t0" | bc -l)"
    record "$side" "bytes_per_point" "$(echo "($m1 - $m0) / $POINTS" | bc -l)"
    record "$side" "matches" "$(redis-cli -p "$port" geosearch pts fromlonlat 1 1 byradius "$RADIUS" km | wc -l)"

    c0=$(cpu_ticks "$pid")
    rps=$(bench_rps "$port" "$SEARCHES" 1 "${search[@]}")
    c1=$(cpu_ticks "$pid")
    record "$side" "search_rps" "$rps"
    record "$side" "search_cpu" "$(echo "($c1 - $c0) * 10000 / $SEARCHES" | bc -l)"

    c0=$(cpu_ticks "$pid")
    rps=$(bench_rps "$port" "$SEARCHES" 1 "${search[@]}" count 10 asc)
    c1=$(cpu_ticks "$pid")
    record "$side" "search10_rps" "$rps"
    record "$side" "search10_cpu" "$(echo "($c1 - $c0) * 10000 / $SEARCHES" | bc -l)"

    for p in 1 16; do
        redis-cli -p "$port" del adds >/dev/null
        c0=$(cpu_ticks "$pid")
        rps=$(bench_rps "$port" "$REQUESTS" "$p" -r 1000000000 geoadd adds __rand_int__e-9 __rand_int__e-9 "m:__rand_int__")
        c1=$(cpu_ticks "$pid")
        record "$side" "geoadd_rps_p$p" "$rps"
        record "$side" "geoadd_cpu_p$p" "$(echo "($c1 - $c0) * 10000 / $REQUESTS" | bc -l)"
    done
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
}

run_rounds

python3 "$HELPER" side-table "$results" \
    "Geo, $POINTS points in one key, 50 clients, median of $ROUNDS rounds [min–max]" \
    "Load (GEOADD ×1000 via --pipe) seconds|load_s|.2f" \
    "Bytes per point|bytes_per_point|.1f" \
    "Matches of one ${RADIUS} km search|matches|.0f" \
    "GEOSEARCH BYRADIUS calls/s|search_rps|,.0f" \
    "GEOSEARCH BYRADIUS server CPU µs/call|search_cpu|.1f" \
    "GEOSEARCH BYRADIUS COUNT 10 ASC calls/s|search10_rps|,.0f" \
    "GEOSEARCH BYRADIUS COUNT 10 ASC server CPU µs/call|search10_cpu|.1f" \
    "GEOADD P1 requests/s|geoadd_rps_p1|,.0f" \
    "GEOADD P1 server CPU µs/call|geoadd_cpu_p1|.3f" \
    "GEOADD P16 requests/s|geoadd_rps_p16|,.0f" \
    "GEOADD P16 server CPU µs/call|geoadd_cpu_p16|.3f"
