#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_memcached.sh — memcached parser against the server's own counters and
# the client's log on a real capture: a private memcached (random loopback
# port, TCP only) is driven by tests/e2e/lib/proto_memcached_client.py over the
# text protocol (sets with and without noreply, single and multi-key gets, a
# pipeline of gets, deletes, counters, touch, cas, meta commands with a quiet
# miss) and the binary protocol (set, quiet sets and gets ended by No-op, get
# hit and miss, delete, increment, multi-packet stat, version), recorded by
# tcpdump. Then:
#   - per class, tbneck's requests equal the commands the client got answers
#     to, and tbneck's "unanswered" count equals those it sent with noreply
#     or quietly and got none;
#   - memcached's `stats`: cmd_set = tbneck's storage requests + the silent
#     sets; cmd_get = the keys of every retrieval; delete and incr hits+misses
#     = tbneck's requests + the silent ones; cmd_touch and cas hits+badval+misses
#     = tbneck's; the NOT_FOUND statuses (1) = the client's misses;
#   - every arrival is a client packet's time and every departure a server
#     packet's, on the request's own connection (tshark's frame list).
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
for p in memcached tcpdump tshark python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
user=()
[ "$(id -u)" -eq 0 ] && user=(-u nobody) # memcached will not run as root
memcached -p "$port" -l 127.0.0.1 -U 0 -m 64 -t 2 "${user[@]}" >"$work/memcached.log" 2>&1 &
pids+=($!)
python3 - "$port" <<'PY' || { echo "FAIL: memcached did not start"; cat "$work/memcached.log"; exit 1; }
import socket, sys, time
for _ in range(50):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY

# shellcheck source=lib/tcpdump.sh
source "$lib/tcpdump.sh"
tcpdump_start "$work/cap.pcap" "tcp port $port"
python3 "$lib/proto_memcached_client.py" "$port" "$work/client.json"
tcpdump_stop "$work/cap.pcap" ||
    { echo "FAIL: tcpdump dropped packets"; cat "$work/cap.pcap.err"; exit 1; }
python3 - "$port" >"$work/stats.txt" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"stats\r\n")
buf = b""
while not buf.endswith(b"END\r\n"):
    buf += s.recv(65536)
sys.stdout.write(buf.decode())
PY

"$TBNECK" capture -r "$work/cap.pcap" --db "$work/t.db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
"$TBNECK" export requests --db "$work/t.db" >"$work/requests.csv"
tshark -r "$work/cap.pcap" -Y "tcp.len > 0" -T fields -E separator=/t -e frame.time_epoch \
    -e tcp.srcport -e tcp.dstport >"$work/frames.tsv" 2>/dev/null
python3 "$lib/proto_memcached_compare.py" "$port" "$work/requests.csv" "$work/client.json" \
    "$work/stats.txt" "$work/frames.tsv" "$work/capture.out"
echo "PASS"
