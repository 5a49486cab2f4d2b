#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_fastcgi.sh — FastCGI parser against a real nginx → php-fpm pair on
# loopback (random ports, private configs and folders). nginx talks to php-fpm
# over two upstreams: one connection per request (FastCGI's default), and kept
# connections (fastcgi_keep_conn, request ids reused on one connection). The
# PHP script answers 200, 404 (Status header), 302 (Location), a POST with a
# body, a slow page and large outputs (several STDOUT records); curl and a
# bounded wrk run drive it while tcpdump records the FastCGI side.
# Oracles: php-fpm's own access log (one line per request it served: method,
# REQUEST_URI, status) and nginx's (the requests it passed on): tbneck must
# report exactly as many FastCGI requests as each, per connection kind, with
# the same multiset of (method path, status); the slow page's response time
# must cover its 200 ms sleep.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
for p in nginx php-fpm8.2 tcpdump curl wrk python3; do
    command -v "$p" >/dev/null || { echo "FAIL: $p not installed (scripts/deps.sh)"; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
}
trap cleanup EXIT

freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
web=$(freeport)
fpm=$(freeport)
fpm2=$(freeport)
mkdir -p "$work/www" "$work/tmp" "$work/logs"
chmod 755 "$work"
cat >"$work/www/app.php" <<'EOF'
<?php
$p = $_GET['p'] ?? 'ok';
if ($p === 'missing') { http_response_code(404); echo "no such item\n"; }
elseif ($p === 'moved') { header('Location: /elsewhere'); }
elseif ($p === 'slow') { usleep(200000); echo "slept\n"; }
elseif ($p === 'big') { echo str_repeat("tbneck fastcgi ", 20000); }
elseif ($_SERVER['REQUEST_METHOD'] === 'POST') { echo strlen(file_get_contents('php://input')), "\n"; }
else { echo "hello\n"; }
EOF
chmod 644 "$work/www/app.php"

# php-fpm: two pools (one per upstream) with access logs of their own; the
# format is method, REQUEST_URI without the query string, status.
cat >"$work/fpm.conf" <<EOF
[global]
pid = $work/fpm.pid
error_log = $work/logs/fpm-error.log
daemonize = no
[one]
user = www-data
group = www-data
listen = 127.0.0.1:$fpm
pm = static
pm.max_children = 3
access.log = $work/logs/fpm-one.log
access.format = "%m %r %s"
[kept]
user = www-data
group = www-data
listen = 127.0.0.1:$fpm2
pm = static
pm.max_children = 3
access.log = $work/logs/fpm-kept.log
access.format = "%m %r %s"
EOF
cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 256; }
http {
    log_format fc '\$request_method \$uri \$status \$upstream_addr';
    access_log $work/logs/access.log fc;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    upstream kept { server 127.0.0.1:$fpm2; keepalive 4; }
    server {
        listen 127.0.0.1:$web;
        root $work/www;
        location /one/ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $work/www/app.php;
            fastcgi_pass 127.0.0.1:$fpm;
        }
        location /kept/ {
            include /etc/nginx/fastcgi_params;
            fastcgi_param SCRIPT_FILENAME $work/www/app.php;
            fastcgi_keep_conn on;
            fastcgi_pass kept;
        }
    }
}
EOF
php-fpm8.2 -n -y "$work/fpm.conf" -F >"$work/logs/fpm.out" 2>&1 &
pids+=($!)
nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" &
pids+=($!)
u="http://127.0.0.1:$web"
for _ in $(seq 100); do
    curl -sf "$u/one/x?p=ok" >/dev/null 2>&1 && curl -sf "$u/kept/x?p=ok" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "$u/kept/x?p=ok" >/dev/null || { cat "$work/logs/"*; echo "FAIL: nginx/php-fpm did not come up"; exit 1; }
# What was served before the capture does not count.
: >"$work/logs/fpm-one.log"
: >"$work/logs/fpm-kept.log"
: >"$work/logs/access.log"

tcpdump -i lo -s 0 -B 32768 --time-stamp-precision=nano -U -w "$work/cap.pcap" \
    "tcp and (port $fpm or port $fpm2)" 2>"$work/tcpdump.err" &
tpid=$!
pids+=($tpid)
for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
sleep 0.2

for k in one kept; do
    curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
        "$u/$k/items/17?p=ok" "$u/$k/items/42?p=missing" "$u/$k/go?p=moved" "$u/$k/big?p=big" \
        "$u/$k/items/5?p=ok"
    curl -s -o /dev/null "$u/$k/slow?p=slow"
    head -c 200000 /dev/urandom | curl -s -o /dev/null -H 'Expect:' --data-binary @- "$u/$k/upload"
done
cat >"$work/stop.lua" <<'LUA'
local n = 0
response = function(status, headers, body)
    n = n + 1
    if n >= 300 then wrk.thread:stop() end
end
LUA
timeout 20 wrk -t1 -c4 -d10s -s "$work/stop.lua" "$u/one/items/9?p=ok" >"$work/wrk1.out" 2>&1
timeout 20 wrk -t1 -c4 -d10s -s "$work/stop.lua" "$u/kept/items/9?p=ok" >"$work/wrk2.out" 2>&1
sleep 1.2 # tcpdump hands over its buffer at least once a second
kill -INT "$tpid"
wait "$tpid" 2>/dev/null || true
grep -q "^0 packets dropped by kernel" "$work/tcpdump.err" ||
    { cat "$work/tcpdump.err"; echo "FAIL: tcpdump dropped packets"; exit 1; }

db="$work/t.db"
"$TBNECK" capture -r "$work/cap.pcap" --db "$db" >"$work/capture.out" 2>&1 ||
    { echo "FAIL: tbneck capture"; cat "$work/capture.out"; exit 1; }
"$TBNECK" export requests --db "$db" >"$work/requests.csv"
"$TBNECK" tiers --db "$db" >"$work/tiers.out"
python3 - "$work" "$fpm" "$fpm2" <<'EOF'
import collections, csv, re, sys
work, fpm, fpm2 = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(work + "/requests.csv")))
fail = []
for r in rows:
    if not r["tier"].startswith("fastcgi-"):
        fail.append("unexpected tier %s" % r["tier"])

def fold(path):
    # tbneck's class rule for paths, written again here: numeric segments → {id}.
    return "/".join("{id}" if s.isdigit() else s for s in path.split("/"))

# nginx also logs the requests wrk gave up on when it stopped (499, client
# closed): php-fpm never answered those, and they are not counted.
nginx = collections.Counter()
for line in open(work + "/logs/access.log"):
    m, uri, status, up = line.split()
    if status != "499":
        nginx[up.rsplit(":", 1)[1]] += 1
for port, log in ((fpm, "fpm-one.log"), (fpm2, "fpm-kept.log")):
    want = collections.Counter()
    for line in open(work + "/logs/" + log):
        m, uri, status = line.split()
        want[(m + " " + fold(uri), int(status))] += 1
    got = collections.Counter((r["class"], int(r["status"])) for r in rows
                              if r["server"].endswith(":" + port))
    n_want, n_got = sum(want.values()), sum(got.values())
    print("port %s: php-fpm access log %d, nginx %d, tbneck %d" % (port, n_want, nginx[port], n_got))
    if n_want != n_got or nginx[port] != n_got:
        fail.append("port %s: counts php-fpm %d nginx %d tbneck %d" % (port, n_want, nginx[port], n_got))
    if want != got:
        fail.append("port %s: (class, status) differ:\n  php-fpm %s\n  tbneck  %s"
                    % (port, sorted(want.items()), sorted(got.items())))
    if n_got < 300:
        fail.append("port %s: only %d requests" % (port, n_got))
    kind = "one" if port == fpm else "kept"
    slow = [r for r in rows if r["server"].endswith(":" + port) and r["class"] == "GET /%s/slow" % kind]
    if len(slow) != 1 or int(slow[0]["departure_ns"]) - int(slow[0]["arrival_ns"]) < 200_000_000:
        fail.append("port %s: slow page %s" % (port, slow))
    # The kept connections were opened before the capture (by the warm-up
    # requests): picked up mid-stream, flag 4; nothing else may be flagged.
    bad = [r for r in rows if r["server"].endswith(":" + port)
           and int(r["flags"]) & ~(4 if port == fpm2 else 0)]
    if bad:
        fail.append("port %s: %d records flagged, e.g. %s" % (port, len(bad), bad[0]))
mid = sum(1 for r in rows if r["server"].endswith(":" + fpm2) and int(r["flags"]) & 4)
print("picked up mid-stream: %d" % mid)
if mid == 0:
    fail.append("no kept connection was picked up mid-stream")
# One connection per request on the first upstream; few connections on the kept one.
conns = collections.Counter(r["server"].rsplit(":", 1)[1] for r in rows)
per_conn = collections.defaultdict(set)
for r in rows:
    per_conn[r["server"].rsplit(":", 1)[1]].add(r["conn"])
print("connections: %s" % {k: len(v) for k, v in per_conn.items()})
if len(per_conn[fpm]) != conns[fpm]:
    fail.append("port %s: %d connections for %d requests" % (fpm, len(per_conn[fpm]), conns[fpm]))
if len(per_conn[fpm2]) > 8:
    fail.append("port %s: %d connections: keep-alive not exercised" % (fpm2, len(per_conn[fpm2])))
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
EOF
echo "PASS"
