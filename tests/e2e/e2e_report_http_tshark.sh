#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_report_http_tshark.sh — a real HTTP capture on loopback (a private nginx
# serving static files and proxying /slow/ to a slow python upstream, loaded
# by a paced python client for a few seconds, recorded by tcpdump with
# nanosecond stamps):
# every response tshark finds (its own http.request_in/http.time pairing), on
# the nginx tier and on the upstream tier, is exactly one tbneck record with
# the same departure and departure - arrival = http.time to the nanosecond,
# nothing more, and as many as the load generator got answers; tbneck's
# per-window load of the nginx tier must equal tshark's io,stat
# LOAD(http.time) on the same file, within the tolerance that
# tests/e2e/lib/report_tshark.py states and explains.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
for p in nginx tcpdump tshark editcap curl python3; do
    command -v "$p" >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done
# Capturing on lo needs root (or CAP_NET_RAW, which CI containers give root).
[ "$(id -u)" = 0 ] || { echo "SKIP: capturing on lo needs root"; exit 77; }

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port=$(freeport)
up=$(freeport)
while [ "$up" = "$port" ]; do up=$(freeport); done

mkdir -p "$work/www" "$work/tmp" "$work/logs"
# nginx workers run as an unprivileged user: they must be able to read www.
chmod 755 "$work"
echo "hello from tbneck's e2e test" >"$work/www/index.html"
head -c 3000 /dev/zero | tr '\0' 'a' >"$work/www/mid.txt"
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    upstream slow { server 127.0.0.1:$up; keepalive 8; }
    server {
        listen 127.0.0.1:$port;
        root $work/www;
        location /slow/ {
            proxy_pass http://slow;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
python3 "$lib/report_upstream.py" "$up" 7 &
pids+=($!)
nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" &
pids+=($!)
for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$port/index.html" >/dev/null 2>&1 &&
        curl -sf "http://127.0.0.1:$up/warm" >/dev/null 2>&1 && break
    sleep 0.1
done

# A loaded machine can make tcpdump drop packets on lo; the comparison wants a
# complete capture, so it is repeated (at most 3 times) until none is dropped.
capture_once() {
    tcpdump -i lo -Z root -s 0 -B 32768 --time-stamp-precision=nano -U -w "$work/raw.pcap" \
        "tcp port $port or tcp port $up" 2>"$work/tcpdump.err" &
    tpid=$!
    pids+=($tpid)
    for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
    sleep 0.2
    python3 "$lib/report_load.py" "$port" 3 11 >"$work/load.out" ||
        { echo "FAIL: the load generator failed"; exit 1; }
    sleep 1.2 # tcpdump hands over its buffer at least once a second
    kill -INT "$tpid"
    wait "$tpid" 2>/dev/null || true
    grep -q "^0 packets dropped by kernel" "$work/tcpdump.err"
}
attempt=1
until capture_once; do
    echo "tcpdump dropped packets (attempt $attempt):"; cat "$work/tcpdump.err"
    [ "$attempt" -lt 3 ] || { echo "FAIL: tcpdump dropped packets in 3 attempts (machine too loaded)"; exit 1; }
    attempt=$((attempt + 1))
done
read -r _ total _ static _ slow <"$work/load.out" || true
[[ "$total" =~ ^[0-9]+$ && "$slow" =~ ^[0-9]+$ && "$total" -ge 500 && "$slow" -ge 5 ]] ||
    { echo "FAIL: the load did not run: $(cat "$work/load.out")"; exit 1; }
echo "load: $total answered requests ($static static, $slow through the slow upstream)"

# tshark's rows start at the first packet; tbneck's windows at multiples of
# the width since the epoch. Shift the capture so that its first packet lies
# on a 50 ms boundary, then both grids coincide.
width=50000000
first=$(tshark -r "$work/raw.pcap" -c 1 -T fields -e frame.time_epoch 2>/dev/null)
first_ns=$(python3 -c "import sys; s, f = sys.argv[1].split('.')
print(int(s) * 10**9 + int(f.ljust(9, '0')[:9]))" "$first")
shift_ns=$(( (width - first_ns % width) % width ))
editcap -t "$(printf '0.%09d' "$shift_ns")" "$work/raw.pcap" "$work/cap.pcap"
t0=$(( first_ns + shift_ns ))

db="$work/t.db"
"$TBNECK" capture -r "$work/cap.pcap" --db "$db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
tier="http-$port"
"$TBNECK" export requests --tier "$tier" --db "$db" >"$work/requests.csv"
"$TBNECK" export requests --tier "http-$up" --db "$db" >"$work/upstream.csv"
# Every response, one by one: tshark's pairing and http.time against tbneck's
# records, and the counts against what the load generator was answered.
tshark -r "$work/cap.pcap" -d "tcp.port==$port,http" -d "tcp.port==$up,http" -T fields \
    -E separator=/t -E aggregator=, -e frame.number -e frame.time_epoch -e tcp.stream \
    -e tcp.srcport -e tcp.dstport -e tcp.segment -e http.request.method -e http.response.code \
    -e http.request_in -e http.time >"$work/frames.tsv" 2>/dev/null
python3 "$lib/proto_http_compare.py" "$work/requests.csv" "$work/frames.tsv" "$port" \
    --strict --expect "$total"
python3 "$lib/proto_http_compare.py" "$work/upstream.csv" "$work/frames.tsv" "$up" \
    --strict --expect "$slow"
"$TBNECK" export windows --tier "$tier" --window 50ms --db "$db" >"$work/windows.csv"
tshark -r "$work/cap.pcap" -q -z io,stat,0.05,"LOAD(http.time)http.time && tcp.srcport==$port" \
    >"$work/tshark.out" 2>/dev/null

python3 "$lib/report_tshark.py" "$work/tshark.out" "$work/requests.csv" "$work/windows.csv" \
    "$t0" "$width"

# The report on the same data must name the tier and carry its request count.
"$TBNECK" report --tier "$tier" --db "$db" --format json >"$work/report.json"
python3 - "$work/report.json" "$work/requests.csv" "$tier" <<'EOF'
import csv, json, sys
rep = json.load(open(sys.argv[1]))
n = sum(1 for _ in csv.DictReader(open(sys.argv[2])))
assert rep["tier"] == sys.argv[3], rep["tier"]
assert rep["window_ns"] == 50000000, rep["window_ns"]
assert rep["requests"] == n, (rep["requests"], n)
print("report: tier %s, %d requests" % (rep["tier"], n))
EOF
echo "PASS"
