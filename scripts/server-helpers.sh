# Helpers for scripts that start servers (sourced, not run; bench-common.sh
# and fuzz-seeds.sh): a free TCP port, and waiting for a server's PONG.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ping() { for _ in $(seq 1 600); do [[ $(redis-cli -p "$1" ping 2>/dev/null) == PONG ]] && return 0; sleep 0.1; done; echo "server on $1 did not start" >&2; exit 1; }
