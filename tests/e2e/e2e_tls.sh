#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_tls.sh — TLS parser (exchanges timed by record turns) against a real
# nginx proxying with proxy_pass https:// to a second nginx on loopback, with
# a self-signed certificate made here by openssl; random ports, private
# configs and folders. The backend listens on two ports; the front speaks TLS
# 1.2 to one and TLS 1.3 to the other, over kept connections (many requests per TLS
# connection, server name sent: the class) and over a new connection per
# request (a full handshake before each; no server name: class "tls"). curl
# sends small and large answers and a large POST; wrk loads every path, each
# run bounded by a response count.
# Oracle: the backend's access log, one line per request with the client's
# port and the TLS version: tbneck must report, for each backend port and for
# each TLS connection (client port), exactly as many requests as the backend
# served on it; and the six slow pages (and only they) must take 150 ms or more.
# Two connections made by curl directly to the backend (TLS 1.2, TLS 1.3)
# leave their session keys for tshark: there every arrival and departure must
# be the frame of the decrypted HTTP request and of its response's end.
set -euo pipefail
: "${TBNECK:?}" "${TB_SRCDIR:?}"
. "$TB_SRCDIR/tests/e2e/lib/e2e_common.sh"
need nginx openssl tcpdump curl wrk python3

# The backend's ports lie below the kernel's ephemeral range, as servers'
# ports do: the connections picked up mid-stream (whose handshake was not
# seen, so nothing in them says which side serves) are then told apart by the
# lower port, tbneck's rule for such connections.
lowport() {
    python3 -c 'import random, socket
while True:
    p = random.randrange(20000, 30000)
    try:
        s = socket.socket(); s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass'
}
front=$(freeport)
b12=$(lowport)
b13=$(lowport)
while [ "$b13" = "$b12" ]; do b13=$(lowport); done
slow=$(freeport)
mkdir -p "$work/www" "$work/tmp" "$work/logs"
echo "hello" >"$work/www/index.html"
head -c 150000 /dev/urandom | base64 >"$work/www/big.txt"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=backend.test" \
    -keyout "$work/key.pem" -out "$work/cert.pem" >"$work/openssl.log" 2>&1 ||
    { cat "$work/openssl.log"; echo "FAIL: openssl"; exit 1; }

cat >"$work/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/logs/error.log;
events { worker_connections 512; }
http {
    log_format be '\$server_port \$remote_port \$ssl_protocol \$ssl_server_name \$uri \$status';
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    fastcgi_temp_path $work/tmp;
    uwsgi_temp_path $work/tmp;
    scgi_temp_path $work/tmp;
    keepalive_requests 100000;
    # The backend, on two ports; /slow and /echo are answered by a plain-HTTP
    # helper behind it (150 ms late; the length of a POST body).
    server {
        listen 127.0.0.1:$b12 ssl;
        listen 127.0.0.1:$b13 ssl;
        ssl_certificate $work/cert.pem;
        ssl_certificate_key $work/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        access_log $work/logs/backend.log be;
        root $work/www;
        location = /echo { client_max_body_size 10m; proxy_pass http://127.0.0.1:$slow/echo; }
        location = /slow { proxy_pass http://127.0.0.1:$slow/slow; }
    }
    upstream k12 { server 127.0.0.1:$b12; keepalive 4; }
    upstream k13 { server 127.0.0.1:$b13; keepalive 4; }
    server {
        listen 127.0.0.1:$front;
        access_log off;
        client_max_body_size 10m;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_ssl_server_name on;
        proxy_ssl_name backend.test;
        proxy_ssl_session_reuse on;
        location /k12/ { proxy_ssl_protocols TLSv1.2; proxy_pass https://k12/; }
        location /k13/ { proxy_ssl_protocols TLSv1.3; proxy_pass https://k13/; }
        location /n12/ { proxy_ssl_protocols TLSv1.2; proxy_ssl_server_name off;
                         proxy_pass https://127.0.0.1:$b12/; }
        location /n13/ { proxy_ssl_protocols TLSv1.3; proxy_ssl_server_name off;
                         proxy_pass https://127.0.0.1:$b13/; }
    }
}
EOF
# The helper behind the backend: /slow after 150 ms, /echo the body's length.
cat >"$work/helper.py" <<'EOF'
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        time.sleep(0.15)
        self.answer(b"slept\n")
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.answer(b"%d\n" % len(self.rfile.read(n)))
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
python3 "$work/helper.py" "$slow" &
pids+=($!)
u="http://127.0.0.1:$front"
start_nginx() {
    nginx -p "$work" -c "$work/nginx.conf" -e "$work/logs/error.log" &
    npid=$!
    pids+=($npid)
    for _ in $(seq 100); do
        curl -sf "$u/k13/index.html" >/dev/null 2>&1 && curl -sf "$u/k12/index.html" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    cat "$work/logs/error.log"; echo "FAIL: nginx did not come up"; exit 1
}
start_nginx
for _ in $(seq 100); do curl -sf -o /dev/null "$u/k12/slow" && break; sleep 0.1; done
for k in n12/index.html n13/index.html k12/slow k13/slow; do
    curl -sf -o /dev/null "$u/$k" || { cat "$work/logs/error.log"; echo "FAIL: nginx path $k"; exit 1; }
done
# The kept connections the warm-up opened are closed with nginx; the restart's
# readiness check opens a few again, which the capture picks up mid-stream.
kill -QUIT "$npid"
wait "$npid" 2>/dev/null || true
start_nginx
# What was served before the capture does not count: a last request marks
# the end of the warm-up; once the log shows it, it is emptied.
curl -s -o /dev/null "$u/n13/marker"
for _ in $(seq 100); do grep -q marker "$work/logs/backend.log" && break; sleep 0.1; done
: >"$work/logs/backend.log"

tap_start "tcp and (port $b12 or port $b13)"

head -c 120000 /dev/urandom >"$work/body.bin"
for k in k12 k13 n12 n13; do
    curl -s -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
        "$u/$k/index.html" "$u/$k/big.txt" "$u/$k/missing" "$u/$k/slow"
    curl -s -o /dev/null -H 'Expect:' --data-binary @"$work/body.bin" "$u/$k/echo"
done
for k in k12 k13 n12 n13; do
    wrk_bounded 250 3 "$u/$k/index.html"
done
# Direct clients whose session keys tshark can use (curl writes them to
# SSLKEYLOGFILE): five requests on one connection, TLS 1.2 and TLS 1.3.
for port in "$b12" "$b13"; do
    v=1.2
    [ "$port" = "$b13" ] && v=1.3
    b="https://backend.test:$port"
    SSLKEYLOGFILE="$work/keys.log" curl -sk --http1.1 --tlsv$v --tls-max $v \
        --resolve "backend.test:$port:127.0.0.1" -o /dev/null -o /dev/null -o /dev/null \
        -o /dev/null -o /dev/null "$b/index.html" "$b/big.txt" "$b/missing" "$b/slow" "$b/index.html"
done
tap_stop
# tshark decrypts those connections: for each HTTP response, the frame of its
# request and its own (the one that completes it).
tshark -r "$work/cap.pcap" -o "tls.keylog_file:$work/keys.log" -d "tcp.port==$b12,tls" \
    -d "tcp.port==$b13,tls" -Y http -T fields -E separator=/t -e frame.number \
    -e frame.time_epoch -e tcp.srcport -e tcp.dstport -e http.request_in \
    >"$work/http.tsv" 2>/dev/null

tbneck_requests
python3 - "$work" "$b12" "$b13" <<'EOF'
import collections, csv, sys
work, b12, b13 = sys.argv[1], sys.argv[2], sys.argv[3]
rows = list(csv.DictReader(open(work + "/requests.csv")))
fail = []
want = collections.Counter()
proto = collections.defaultdict(set)
names = {}
for line in open(work + "/logs/backend.log"):
    sport, cport, ver, sni, uri, status = line.split()
    want[(sport, cport)] += 1
    proto[sport].add(ver)
    # (a client port may serve two connections in turn: each name it had)
    names.setdefault((sport, cport), set()).add("tls" if sni == "-" else sni)
got = collections.Counter((r["server"].rsplit(":", 1)[1], r["client"].rsplit(":", 1)[1])
                          for r in rows)
for port, ver in ((b12, "TLSv1.2"), (b13, "TLSv1.3")):
    w = {k: v for k, v in want.items() if k[0] == port}
    g = {k: v for k, v in got.items() if k[0] == port}
    print("port %s (%s): backend log %d requests on %d connections; tbneck %d on %d"
          % (port, ",".join(proto[port]), sum(w.values()), len(w), sum(g.values()), len(g)))
    if proto[port] != {ver}:
        fail.append("port %s spoke %s, not %s" % (port, proto[port], ver))
    if w != g:
        diff = sorted(set(w.items()) ^ set(g.items()))[:6]
        fail.append("port %s: per-connection counts differ (log vs tbneck): %s" % (port, diff))
    if sum(w.values()) < 500:
        fail.append("port %s: only %d requests" % (port, sum(w.values())))
tiers = set(r["tier"] for r in rows)
if tiers != {"tls-" + b12, "tls-" + b13}:
    fail.append("tiers %s" % tiers)
# The class is the server name the front sent (SNI), "tls" without one, and
# on the connections picked up mid-stream (flag 4: the kept connections of the
# readiness check), whose handshake was not seen.
classes = collections.Counter(r["class"] for r in rows)
print("classes: %s" % dict(classes))
for r in rows:
    key = (r["server"].rsplit(":", 1)[1], r["client"].rsplit(":", 1)[1])
    mid = int(r["flags"]) & 4
    if r["class"] not in ({"tls"} if mid else names.get(key, set())):
        fail.append("class %s on a connection that sent %s" % (r["class"], names.get(key)))
        break
if set(classes) != {"backend.test", "tls"}:
    fail.append("classes %s" % classes)
if any(int(r["flags"]) & ~4 for r in rows):
    fail.append("flagged records: %s" % [r for r in rows if int(r["flags"]) & ~4][:3])
print("picked up mid-stream: %d" % sum(1 for r in rows if int(r["flags"]) & 4))
slow = [r for r in rows if int(r["departure_ns"]) - int(r["arrival_ns"]) >= 150_000_000]
if len(slow) != 6:
    fail.append("%d exchanges of 150 ms or more, expected the 6 slow pages: %s" % (len(slow), slow))

# The decrypted connections: every request's arrival is the frame of its HTTP
# request, its departure the frame that completes its HTTP response (tshark).
from decimal import Decimal
frames, pairs = {}, []
for line in open(work + "/http.tsv"):
    num, t, sp, dp, req_in = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    frames[num] = (int(Decimal(t) * 1000000000), sp, dp)
    if req_in:
        pairs.append((req_in, num))
want_t = sorted((frames[q][1], frames[q][0], frames[a][0]) for q, a in pairs)
cports = set(c for c, _, _ in want_t)
# The decrypted connections as tbneck numbers them: those holding a request
# that starts at a decrypted request's frame. A client port can be reused by
# another connection of the run (the front's, seconds apart), so records are
# taken by connection, not by port; every record of those connections counts.
starts = set((c, a) for c, a, _ in want_t)
conns = set(r["conn"] for r in rows
            if (r["client"].rsplit(":", 1)[1], int(r["arrival_ns"])) in starts)
got_t = sorted((r["client"].rsplit(":", 1)[1], int(r["arrival_ns"]), int(r["departure_ns"]))
               for r in rows if r["conn"] in conns)
print("decrypted: %d requests on %d connections" % (len(want_t), len(cports)))
if len(want_t) != 10 or len(cports) != 2:
    fail.append("tshark decrypted %d requests on %d connections, expected 10 on 2"
                % (len(want_t), len(cports)))
if want_t != got_t:
    fail.append("times differ from the decrypted HTTP:\n  tshark %s\n  tbneck %s" % (want_t, got_t))
for f in fail:
    print("FAIL:", f)
sys.exit(1 if fail else 0)
EOF
echo "PASS"
