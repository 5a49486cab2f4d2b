#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_redis.sh — Redis parser against the server's own counters on a real
# capture: a private redis-server (random loopback port, no persistence) has
# its statistics reset, then tcpdump records redis-benchmark without and with
# pipelines of 16 (-P 16), redis-cli running MULTI/EXEC, a RESP3 session
# (HELLO 3), a failing command, CLIENT SETNAME and CONFIG GET, a Python client
# sending inline commands, an empty line and CLIENT REPLY SKIP, a subscriber
# with a publisher, and MONITOR. Then:
#   - per command (subcommands apart: "CONFIG GET" is config|get), tbneck's
#     count equals INFO commandstats' calls, but for the commands the test
#     silenced (CLIENT REPLY SKIP and the SET it skipped: counted by tbneck as
#     unanswered) and SUBSCRIBE and MONITOR (push streams: counted as such, not
#     as requests);
#   - every arrival is the time of a client packet and every departure the time
#     of a server packet of the same connection (tshark's frame list), and
#     sixteen commands of one pipeline share their packet's arrival;
#   - the failing command's status is WRONGTYPE's (2).
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
for p in redis-server redis-cli redis-benchmark tcpdump tshark python3; do
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
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
    --daemonize no --logfile "$work/redis.log" &
pids+=($!)
cli=(redis-cli -h 127.0.0.1 -p "$port")
for _ in $(seq 50); do "${cli[@]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
"${cli[@]}" config resetstat >/dev/null || { echo "FAIL: redis-server did not start"; exit 1; }

# shellcheck source=lib/tcpdump.sh
source "$lib/tcpdump.sh"
tcpdump_start "$work/cap.pcap" "tcp port $port"

redis-benchmark -h 127.0.0.1 -p "$port" -n 2000 -c 4 -t ping,set,get -q >"$work/bench1.out" 2>&1
redis-benchmark -h 127.0.0.1 -p "$port" -n 4000 -c 4 -P 16 -t set,get,incr,lpush,lrange_100 -q \
    >"$work/bench16.out" 2>&1
printf 'MULTI\nSET a 1\nINCR a\nEXEC\n' | "${cli[@]}" >"$work/multi.out"
"${cli[@]}" -3 hset h f v >/dev/null
"${cli[@]}" -3 hgetall h >/dev/null
"${cli[@]}" incr h >"$work/wrongtype.out" 2>&1 || true
"${cli[@]}" client setname e2e >/dev/null
"${cli[@]}" config get maxmemory >/dev/null
timeout 3 "${cli[@]}" subscribe news >"$work/sub.out" 2>&1 &
sub=$!
for _ in $(seq 30); do grep -q news "$work/sub.out" 2>/dev/null && break; sleep 0.1; done
"${cli[@]}" publish news hello >/dev/null
timeout 1 "${cli[@]}" monitor >/dev/null 2>&1 || true
wait "$sub" 2>/dev/null || true
python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def talk(data, want):
    s.sendall(data)
    got = b""
    deadline = time.time() + 5
    while not got.endswith(want) and time.time() < deadline:
        got += s.recv(65536)
    assert got.endswith(want), got
talk(b"PING\r\n", b"+PONG\r\n")
talk(b"\r\nset inl v\r\n", b"+OK\r\n")  # the empty line gets no reply
talk(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$4\r\nSKIP\r\n"
     b"*3\r\n$3\r\nSET\r\n$7\r\nskipped\r\n$1\r\n1\r\n"
     b"*2\r\n$3\r\nGET\r\n$7\r\nskipped\r\n", b"$1\r\n1\r\n")
s.close()
PY
tcpdump_stop "$work/cap.pcap" ||
    { echo "FAIL: tcpdump dropped packets"; cat "$work/cap.pcap.err"; exit 1; }
grep -q WRONGTYPE "$work/wrongtype.out" || { echo "FAIL: no WRONGTYPE"; cat "$work/wrongtype.out"; exit 1; }
"${cli[@]}" info commandstats >"$work/stats.txt"

"$TBNECK" capture -r "$work/cap.pcap" --db "$work/t.db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
"$TBNECK" export requests --db "$work/t.db" >"$work/requests.csv"
tshark -r "$work/cap.pcap" -Y "tcp.len > 0" -T fields -E separator=/t -e frame.time_epoch \
    -e tcp.srcport -e tcp.dstport >"$work/frames.tsv" 2>/dev/null
python3 "$lib/proto_redis_compare.py" "$port" "$work/requests.csv" "$work/stats.txt" \
    "$work/frames.tsv" "$work/capture.out"
echo "PASS"
