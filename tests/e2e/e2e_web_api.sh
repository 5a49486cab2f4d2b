#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_web_api.sh — `tbneck serve` against a simulated database: the JSON API's
# answers (each server's episodes against the simulator's freezes) and its
# error cases (unknown tier 404, bad width 400, POST 405, path
# traversal raw and encoded, oversized head 431, garbage 400, 300 idle
# connections then a normal request still answered), the event stream while a
# report writes new windows, and the listen-address policy.
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"

work=$(mktemp -d "$TB_BUILDDIR/e2e-web-api.XXXXXX")
trap 'stop_serve; [ -n "${sse_pid:-}" ] && kill "$sse_pid" 2>/dev/null; rm -rf "$work"' EXIT

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q || fail "simulator"
"$TBNECK" capture -r "$work/sim.pcap" --db "$work/web.db" >"$work/capture.out" 2>&1 ||
  { cat "$work/capture.out"; fail "offline capture"; }

# Policy: loopback only unless --allow-remote (usage error, exit 2, one line).
"$TBNECK" serve --db "$work/web.db" --listen 0.0.0.0:0 >/dev/null 2>"$work/remote.err"
rc=$?
[ "$rc" -eq 2 ] || fail "non-loopback listen: exit $rc, want 2"
[ "$(wc -l <"$work/remote.err")" -eq 1 ] && grep -q -- '--allow-remote' "$work/remote.err" ||
  { cat "$work/remote.err"; fail "non-loopback listen: want one line naming --allow-remote"; }
ok "0.0.0.0 refused without --allow-remote (exit 2)"
"$TBNECK" serve --db "$work/missing.db" --listen 127.0.0.1:0 >/dev/null 2>"$work/missing.err"
rc=$?
[ "$rc" -eq 1 ] && grep -q missing.db "$work/missing.err" ||
  { cat "$work/missing.err"; fail "missing database: exit $rc, want 1 naming the file"; }
ok "missing database: exit 1"

start_serve "$work/web.db" "$work"
base="http://127.0.0.1:$port"
ok "serving on port $port"

# The stream: new windows written while serve runs are pushed within seconds.
curl -sN --max-time 8 "$base/api/stream" >"$work/sse.out" 2>/dev/null &
sse_pid=$!
sleep 0.5
tiers=$(curl -sf "$base/api/tiers" | python3 -c 'import json,sys; print(" ".join(t["name"] for t in json.load(sys.stdin)["tiers"]))')
[ -n "$tiers" ] || fail "/api/tiers listed no tier"
tier=${tiers%% *}
"$TBNECK" report --tier "$tier" --window 50ms --db "$work/web.db" >/dev/null 2>&1 ||
  fail "report on $tier"
wait "$sse_pid"
sse_pid=""
grep -q '^retry: ' "$work/sse.out" || fail "stream: no retry line"
nwin=$(grep -c '^event: window' "$work/sse.out")
[ "$nwin" -gt 0 ] || { head -c 600 "$work/sse.out"; fail "stream: no window event after report"; }
grep -q "^data: {\"tier\":\"$tier\"" "$work/sse.out" || fail "stream: window events not of $tier"
ok "stream pushed $nwin windows written by a concurrent report"

code() { curl -s -o "$work/body" -w '%{http_code}' "$@"; }
expect() { # expect CODE DESCRIPTION CURL_ARGS...
  local want=$1 what=$2; shift 2
  local got
  got=$(code "$@")
  [ "$got" = "$want" ] || { head -c 300 "$work/body"; echo; fail "$what: HTTP $got, want $want"; }
  ok "$what -> $want"
}
json_ok() { python3 -c "import json,sys; d=json.load(open('$work/body')); $1" ||
  { head -c 400 "$work/body"; echo; fail "$2"; }; }

for t in $tiers; do
  expect 200 "windows of $t" "$base/api/windows?tier=$t&width=50ms"
  json_ok 'n=d["count"]; assert n > 0 and all(len(d[k]) == n for k in ("start_ns","load","throughput","norm_throughput","completions","rt_mean_ns")), n; assert all(b - a == 50000000 for a, b in zip(d["start_ns"], d["start_ns"][1:]))' \
    "windows of $t: want aligned, contiguous 50 ms columns of equal length"
  expect 200 "scatter of $t" "$base/api/scatter?tier=$t&width=100ms"
  json_ok 'n=d["count"]; assert n > 0 and len(d["congested"]) == n == len(d["freeze"]); assert "n_star" in d and "tp_max" in d; ns=d["n_star"] if d["n_star"] is not None else d["n_star_fit"]; assert d["threshold"] == ns; assert all((c == 1) == (ns is not None and l >= ns) for c, l in zip(d["congested"], d["load"]))' \
    "scatter of $t: congested flags must follow load >= N* (else the fit's knee)"
  expect 200 "episodes of $t" "$base/api/episodes?tier=$t&width=50ms"
  json_ok 'assert d["count"] == len(d["episodes"]); assert all(e["end_ns"] > e["start_ns"] and e["kind"] in ("freeze","saturated") for e in d["episodes"])' \
    "episodes of $t"
  expect 200 "analysis of $t" "$base/api/analysis?tier=$t&width=50ms"
  json_ok 'assert d["requests"] > 0 and d["width_ns"] == 50000000 and "n_star_fit" in d and "tp_max" in d' \
    "analysis of $t"
done
# The API agrees with `tbneck report --format json` on the same database.
"$TBNECK" report --tier "$tier" --window 50ms --db "$work/web.db" --format json >"$work/rep.json" ||
  fail "report json"
code "$base/api/analysis?tier=$tier&width=50ms" >/dev/null
python3 - "$work/rep.json" "$work/body" <<'PY' || fail "API analysis differs from report"
import json, sys
r, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("requests", "n_star", "n_star_fit", "tp_max", "work_unit_ns"):
    x, y = r.get(k), a.get(k)
    same = (x is None and y is None) or (x is not None and y is not None and abs(x - y) <= 1e-6 * max(1, abs(x)))
    if not same:
        print("%s: report %r, api %r" % (k, x, y)); sys.exit(1)
if len(r["episodes"]) != a["episodes"]:
    print("episodes: report %d, api %d" % (len(r["episodes"]), a["episodes"])); sys.exit(1)
PY
ok "API analysis equals the report's"
# width=auto: for each tier, the width and reason `report --window auto`
# gives, and the per-tier endpoints at that width. quick.conf has no real
# knee (v0.9's stretch rule refuses the 10 ms one http-8080 once took), so
# every tier may take the default; a capture with one (below) must not.
widths=""
for t in $tiers; do
  "$TBNECK" report --tier "$t" --window auto --db "$work/web.db" --format json >"$work/auto.json" ||
    fail "report --window auto on $t"
  expect 200 "analysis of $t, width auto" "$base/api/analysis?tier=$t&width=auto"
  python3 - "$work/auto.json" "$work/body" <<'PY' || fail "API width=auto differs from report --window auto on $t"
import json, sys
r, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("width auto: report %d ns, api %d ns" % (r["window_ns"], a["width_ns"]))
if r["window_ns"] != a["width_ns"] or r["window_reason"] != a.get("window_reason"):
    print("report %r %r\napi %r %r" % (r["window_ns"], r["window_reason"], a["width_ns"], a.get("window_reason")))
    sys.exit(1)
for k in ("requests", "n_star", "n_star_fit"):
    if r.get(k) != a.get(k):
        print("%s: report %r, api %r" % (k, r.get(k), a.get(k))); sys.exit(1)
PY
  autow=$(python3 -c "import json; print(json.load(open('$work/auto.json'))['window_ns'])")
  expect 200 "windows of $t, width auto" "$base/api/windows?tier=$t&width=auto"
  json_ok "assert d['width_ns'] == $autow and d['count'] > 0 and all(b - a == $autow for a, b in zip(d['start_ns'], d['start_ns'][1:]))" \
    "windows of $t with width auto: want contiguous windows of the chosen width"
  widths="$widths $t=$autow"
done
# A database with a real knee (bench/nstar/db2.conf: 2 cores, N* 2 in the
# simulator's expected.csv) served by a second `serve`: width=auto must leave
# the default and give the report's width, reason and N*, within 10% of 2.
"$TBNECK_SIM" "$TB_SRCDIR/bench/nstar/db2.conf" --duration 10s --out "$work/db2" -q ||
  fail "simulator (db2)"
"$TBNECK" capture -r "$work/db2.pcap" --db "$work/db2.db" >"$work/db2cap.out" 2>&1 ||
  { cat "$work/db2cap.out"; fail "offline capture (db2)"; }
want=$(awk -F, '$1 == "mysql" && $2 == "*" {print $4}' "$work/db2.expected.csv")
[ -n "$want" ] || fail "db2: no expected N* for mysql in the simulator's expected.csv"
"$TBNECK" report --tier mysql --window auto --db "$work/db2.db" --format json >"$work/auto2.json" ||
  fail "report --window auto on db2's mysql"
keep_pid=$serve_pid keep_port=$port
mkdir -p "$work/s2"
start_serve "$work/db2.db" "$work/s2"
code "http://127.0.0.1:$port/api/analysis?tier=mysql&width=auto" >"$work/code2"
stop_serve
serve_pid=$keep_pid port=$keep_port
[ "$(cat "$work/code2")" = 200 ] || { head -c 300 "$work/body"; fail "db2: analysis width=auto: HTTP $(cat "$work/code2")"; }
python3 - "$work/auto2.json" "$work/body" "$want" <<'PY' || fail "db2: width=auto"
import json, sys
r, a, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), float(sys.argv[3])
print("db2 width auto: report %d ns N* %r, api %d ns N* %r, expected %g" % (
    r["window_ns"], r["n_star"], a["width_ns"], a["n_star"], want))
if r["window_ns"] != a["width_ns"] or r["window_reason"] != a.get("window_reason") or r["n_star"] != a["n_star"]:
    print("report and API differ"); sys.exit(1)
if r["window_ns"] == 50000000:
    print("a real knee left at the default 50 ms: the test cannot tell auto from the default"); sys.exit(1)
if r["n_star"] is None or abs(r["n_star"] / want - 1) > 0.10:
    print("N* at the chosen width not within 10% of the expected"); sys.exit(1)
PY
widths="$widths db2:mysql=$(python3 -c "import json; print(json.load(open('$work/auto2.json'))['window_ns'])")"
expect 400 "diagnose: width auto (no tier to choose it from)" "$base/api/diagnose?width=auto"
ok "width=auto as report --window auto:$widths"
# The root cause: the same object as `tbneck diagnose --format json`.
"$TBNECK" diagnose --window 50ms --db "$work/web.db" --format json >"$work/diag.json" ||
  fail "diagnose json"
expect 200 "diagnose" "$base/api/diagnose?width=50ms"
python3 - "$work/diag.json" "$work/body" <<'PY' || fail "API diagnose differs from the CLI's"
import json, sys
c, a = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ("window_ns", "front_tier", "verdict", "tiers", "pools", "episodes"):
    if c[k] != a[k]:
        print("%s: cli %r, api %r" % (k, c[k], a[k])); sys.exit(1)
PY
ok "API diagnose equals the CLI's"
expect 400 "diagnose: bad width" "$base/api/diagnose?width=abc"
expect 200 "health" "$base/api/health"
json_ok 'c=d["captures"]; assert len(c) >= 1 and c[0]["packets"] > 0 and "kernel_drops" in c[0]' "health"
expect 200 "index page" "$base/"
grep -q '<canvas id="scatter"' "$work/body" || fail "index page is not the dashboard"
expect 200 "app.js" "$base/app.js"

# A server of the tier, and a time range.
srv=$(curl -sf "$base/api/tiers" | python3 -c "import json,sys; print([t for t in json.load(sys.stdin)['tiers'] if t['name'] == '$tier'][0]['servers'][0])")
expect 200 "windows of server $srv" "$base/api/windows?tier=$tier&width=50ms&server=$srv"
json_ok 'assert d["count"] > 0 and d["server"] > 0' "windows of one server"
other=$(curl -sf "$base/api/tiers" | python3 -c "import json,sys; print([t for t in json.load(sys.stdin)['tiers'] if t['name'] != '$tier'][0]['servers'][0])")
expect 404 "server of another tier" "$base/api/windows?tier=$tier&width=50ms&server=$other"
expect 400 "malformed server" "$base/api/windows?tier=$tier&width=50ms&server=not-an-address"
expect 200 "windows from +1s to +2s" "$base/api/windows?tier=$tier&width=50ms&from=%2B1s&to=%2B2s"
json_ok 'n=d["count"]; assert 19 <= n <= 21, n' "one second of 50 ms windows"

# Error cases.
expect 404 "unknown tier" "$base/api/windows?tier=nosuchtier&width=50ms"
json_ok 'assert "nosuchtier" in d["error"]' "404 body must name the tier"
expect 400 "bad width" "$base/api/windows?tier=$tier&width=abc"
json_ok 'assert "width" in d["error"]' "400 body must name the parameter"
expect 400 "zero width" "$base/api/scatter?tier=$tier&width=0ms"
expect 400 "missing tier" "$base/api/episodes?width=50ms"
expect 400 "bad from" "$base/api/windows?tier=$tier&from=yesterday"
expect 404 "unknown endpoint" "$base/api/nothing"
expect 404 "unknown file" "$base/nothing.html"
expect 405 "POST to the API" -X POST -d x=1 "$base/api/tiers"
expect 405 "DELETE a file" -X DELETE "$base/index.html"
expect 400 "raw traversal" --path-as-is "$base/../../../../etc/passwd"
grep -q 'root:' "$work/body" && fail "traversal leaked /etc/passwd"
expect 400 "encoded traversal" --path-as-is "$base/%2e%2e/%2e%2e/%2e%2e/etc/passwd"
expect 400 "encoded slash traversal" --path-as-is "$base/..%2f..%2f..%2fetc%2fpasswd"
expect 404 "absolute path after decoding" --path-as-is "$base/%2fetc%2fpasswd"
big=$(head -c 12000 /dev/zero | tr '\0' 'a')
expect 431 "oversized header" -H "X-Big: $big" "$base/api/tiers"

python3 - "$port" <<'PY' || fail "raw socket checks"
import socket, sys, time
port = int(sys.argv[1])

def talk(data, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
            if b"\r\n\r\n" in out and b"Connection: keep-alive" in out:
                break
    except socket.timeout:
        pass
    s.close()
    return out

r = talk(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03garbage\xff\xfe\r\n\r\n")
assert r.startswith(b"HTTP/1.1 400"), r[:80]
print("ok: garbage bytes -> 400")
r = talk(b"GET /api/tiers HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999\r\n\r\n")
assert r.startswith(b"HTTP/1.1 413"), r[:80]
print("ok: announced oversized body -> 413")
# 300 idle connections (cap 256): a real request must still be answered.
idle = []
for i in range(300):
    idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
time.sleep(0.5)
r = talk(b"GET /api/tiers HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
assert r.startswith(b"HTTP/1.1 200"), r[:80]
# The oldest idle ones were closed to make room.
closed = 0
for s in idle[:40]:
    s.settimeout(2)
    try:
        if s.recv(1) == b"":
            closed += 1
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed += 1
for s in idle:
    s.close()
assert closed > 0, "no idle connection was evicted"
print("ok: 300 idle connections, a request still answered; %d of the oldest 40 evicted" % closed)
# Keep-alive: two requests on one connection.
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /api/tiers HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
data = b""
t0 = time.time()
while data.count(b"HTTP/1.1 200") < 2 and time.time() - t0 < 5:
    b = s.recv(65536)
    if not b:
        break
    data += b
s.close()
assert data.count(b"HTTP/1.1 200") == 2, data[:200]
print("ok: pipelined keep-alive requests")
PY

# DNS rebinding: a page of another site reaching this loopback server under
# its own name is refused; addresses and localhost are not.
expect 403 "foreign Host name" -H "Host: rebind.attacker.example" "$base/api/tiers"
expect 200 "Host localhost" -H "Host: localhost:$port" "$base/api/tiers"
expect 200 "Host [::1]" -H "Host: [::1]:$port" "$base/api/tiers"
grep -q "frame-ancestors 'none'" <(curl -sI "$base/") || fail "no CSP frame-ancestors on the page"
ok "CSP frame-ancestors 'none' on the page"

kill -0 "$serve_pid" || fail "serve died during the error cases"
stop_serve
"$TBNECK" serve --db "$work/web.db" --listen 127.0.0.1:0 --allow-host 'bad name!' >/dev/null \
  2>"$work/host.err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$work/host.err")" -eq 1 ] && grep -q 'bad name!' "$work/host.err" ||
  { cat "$work/host.err"; fail "bad --allow-host: exit $rc, want 2 with one line naming it"; }
ok "bad --allow-host: exit 2"
start_serve "$work/web.db" "$work" --allow-host dash.example.org,mon
expect 200 "--allow-host name" -H "Host: Dash.Example.org:$port" "http://127.0.0.1:$port/api/tiers"
expect 403 "name not in --allow-host" -H "Host: other.example.org" "http://127.0.0.1:$port/api/tiers"
stop_serve
grep -qi 'sanitizer\|runtime error' "$work/serve.err" && { cat "$work/serve.err"; fail "sanitizer report"; }
[ "$serve_rc" = 0 ] || { cat "$work/serve.err"; fail "serve exit status $serve_rc after SIGTERM, want 0"; }
ok "serve stopped cleanly on SIGTERM"

# Episodes against the simulator's truth, on report_gc.conf (application
# servers that stop the world for 100-300 ms every 1-3 s; quick.conf's two
# short pauses on a lightly loaded server give it no congestion point, so no
# episode at all): each server's /api/episodes must hold a freeze episode at
# every one of its freezes of 100 ms or more, and no freeze episode where that
# server did not freeze (what e2e_report_sim measures on the report: 26/26).
"$TBNECK_SIM" "$TB_SRCDIR/tests/e2e/lib/report_gc.conf" --out "$work/gc" -q || fail "simulator (gc)"
"$TBNECK" capture -r "$work/gc.pcap" --db "$work/gc.db" >"$work/gc.out" 2>&1 ||
  { cat "$work/gc.out"; fail "offline capture (gc)"; }
start_serve "$work/gc.db" "$work"
base="http://127.0.0.1:$port"
for srv in 10.0.3.1:8080 10.0.3.2:8080; do
  expect 200 "episodes of $srv" "$base/api/episodes?tier=http-8080&width=50ms&server=$srv"
  python3 - "$work/body" "$work/gc.freezes.csv" "$srv" <<'PY' ||
import csv, json, sys
d = json.load(open(sys.argv[1]))
srv = sys.argv[3]
freezes = [(int(r["start_ns"]), int(r["end_ns"])) for r in csv.DictReader(open(sys.argv[2]))
           if r["server"] == srv]
fz = [(e["start_ns"], e["end_ns"]) for e in d["episodes"] if e["kind"] == "freeze"]
big = [f for f in freezes if f[1] - f[0] >= 100_000_000]
missed = [f for f in big if not any(a < f[1] and f[0] < b for a, b in fz)]
false = [e for e in fz if not any(a < e[1] and e[0] < b for a, b in freezes)]
print("%s: %d freezes (%d of 100 ms or more), %d freeze episodes of %d; missed %d, false %d"
      % (srv, len(freezes), len(big), len(fz), d["count"], len(missed), len(false)))
sys.exit(0 if d["count"] == len(d["episodes"]) and big and fz and not missed and not false else 1)
PY
    fail "episodes of $srv do not match the simulator's freezes"
done
ok "episodes: a freeze episode at every simulated freeze of each server, none elsewhere"
stop_serve
[ "$serve_rc" = 0 ] || { cat "$work/serve.err"; fail "serve (gc) exit status $serve_rc"; }
echo "PASS e2e_web_api"
