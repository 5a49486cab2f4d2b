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
# the same multiset of (method path, status); every arrival and departure
# must be the frame of the request's BEGIN_REQUEST and of its END_REQUEST in
# tshark's fcgi dissector; the slow page's time must cover its 200 ms sleep.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
. "$TB_SRCDIR/tests/e2e/lib/e2e_common.sh"
need nginx php-fpm8.2 tcpdump curl wrk python3

web=$(freeport)
fpm=$(freeport)
fpm2=$(freeport)
mkdir -p "$work/www" "$work/tmp" "$work/logs"
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
# What was served before the capture does not count: a last request marks
# the end of the warm-up; once every log shows it (a server may write its line
# after the client has its answer), they are emptied.
curl -sf "$u/one/marker?p=ok" "$u/kept/marker?p=ok" >/dev/null
for _ in $(seq 100); do
    grep -q marker "$work/logs/fpm-one.log" && grep -q marker "$work/logs/fpm-kept.log" &&
        [ "$(grep -c marker "$work/logs/access.log")" = 2 ] && break
    sleep 0.1
done
: >"$work/logs/fpm-one.log"
: >"$work/logs/fpm-kept.log"
: >"$work/logs/access.log"

tap_start "tcp and (port $fpm or port $fpm2)"

for k in one kept; do
    curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
        "$u/$k/items/17?p=ok" "$u/$k/items/42?p=missing" "$u/$k/go?p=moved" "$u/$k/big?p=big" \
        "$u/$k/items/5?p=ok"
    curl -s -o /dev/null "$u/$k/slow?p=slow"
    head -c 200000 /dev/urandom | curl -s -o /dev/null -H 'Expect:' --data-binary @- "$u/$k/upload"
done
wrk_bounded 300 4 "$u/one/items/9?p=ok"
wrk_bounded 300 4 "$u/kept/items/9?p=ok"
tap_stop

tbneck_requests
tshark -r "$work/cap.pcap" -d "tcp.port==$fpm,fcgi" -d "tcp.port==$fpm2,fcgi" -T fields \
    -E separator=/t -E aggregator=, -e frame.time_epoch -e tcp.srcport -e tcp.dstport \
    -e fcgi.type -e fcgi.id >"$work/frames.tsv" 2>/dev/null
python3 - "$work" "$fpm" "$fpm2" <<'EOF'
import collections, csv, re, sys
from decimal import Decimal
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

# tshark's fcgi dissector: per connection and request id, the frame of the
# BEGIN_REQUEST and the frame of the END_REQUEST that follows it.
opened = collections.defaultdict(list)
want_t = []
for line in open(work + "/frames.tsv"):
    f = line.rstrip("\n").split("\t")
    if len(f) < 5 or not f[3]:
        continue
    t = int(Decimal(f[0]) * 1000000000)
    srv = f[2] if f[2] in (fpm, fpm2) else f[1]
    cport = f[1] if srv == f[2] else f[2]
    for typ, rid in zip(f[3].split(","), f[4].split(",")):
        if typ == "1" and srv == f[2]:
            opened[(cport, rid)].append(t)
        elif typ == "3" and srv == f[1] and opened[(cport, rid)]:
            want_t.append((cport, opened[(cport, rid)].pop(0), t))
want_t.sort()
got_t = sorted((r["client"].rsplit(":", 1)[1], int(r["arrival_ns"]), int(r["departure_ns"]))
               for r in rows)
print("tshark: %d requests from BEGIN_REQUEST to END_REQUEST" % len(want_t))
if want_t != got_t:
    miss, extra = sorted(set(want_t) - set(got_t))[:4], sorted(set(got_t) - set(want_t))[:4]
    fail.append("times differ from tshark: missing %s, extra %s" % (miss, extra))
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
EOF
echo "PASS"
