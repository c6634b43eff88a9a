#!/usr/bin/env bash
# TLS, kvstore beside redis-server (Debian's, built with TLS): redis-benchmark
# --tls SET and GET (50 clients, P=1 and P=16, random keys) against each
# server's tls-port, with client certificates (tls-auth-clients yes). For
# each: requests/s and the server's CPU µs per request (user+sys from /proc).
# The ratio column of the CPU rows is kvstore's over Redis's (issue 14's goal:
# at most 0.8). Certificates: a CA and RSA-2048 server and client
# certificates made by openssl, as Redis's gen-test-certs.sh makes them.
# ROUNDS rounds (default 3), interleaved, alternating who goes first; medians
# with the min–max spread.
#
# Usage: scripts/bench-tls.sh  (REQUESTS_P1=200000 REQUESTS_P16=2000000 ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS_P1=${REQUESTS_P1:-200000}
REQUESTS_P16=${REQUESTS_P16:-2000000}
ROUNDS=${ROUNDS:-3}
source scripts/bench-common.sh

certs="$work/certs"
mkdir -p "$certs"
(
    cd "$certs"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -nodes -sha256 -key ca.key -days 30 -subj '/CN=bench CA' -out ca.crt
    for name in server client; do
        openssl genrsa -out $name.key 2048 2>/dev/null
        openssl req -new -sha256 -key $name.key -subj "/CN=bench $name" |
            openssl x509 -req -sha256 -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out $name.crt 2>/dev/null
    done
)
TLS_CLIENT=(--tls --cacert "$certs/ca.crt" --cert "$certs/client.crt" --key "$certs/client.key")

run_side() { # SIDE
    local side=$1 dir="$work/$1" p t n
    rm -rf "$dir"; mkdir -p "$dir"
    port=$(free_port)
    tls_port=$(free_port)
    SERVER_ARGS=(--appendonly no --tls-port "$tls_port" --tls-cert-file "$certs/server.crt"
        --tls-key-file "$certs/server.key" --tls-ca-cert-file "$certs/ca.crt")
    start "$side" "$dir" "$port"
    wait_ping "$port"
    [[ $(redis-cli -p "$tls_port" "${TLS_CLIENT[@]}" ping) == PONG ]] ||
        { echo "$side: no PONG over TLS" >&2; exit 1; }
    for p in 1 16; do
        n=$REQUESTS_P1
        ((p == 16)) && n=$REQUESTS_P16
        for t in set get; do
            bench_port=$tls_port measure "$side" "${t}_p${p}" "$n" "$p" -r 1000000 "${TLS_CLIENT[@]}" -t "$t"
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
        rows+=("$T P$p requests/s over TLS|${t}_p${p}_rps|,.0f")
        rows+=("$T P$p server CPU µs/request over TLS|${t}_p${p}_cpu|.3f")
    done
done
python3 "$HELPER" side-table "$results" \
    "TLS (TLSv1.3, client certificates), 50 clients, median of $ROUNDS rounds [min–max]" \
    "${rows[@]}"
