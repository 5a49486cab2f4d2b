#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_live_idle.sh — no false alarm live: a near-idle HTTP server on loopback
# (Python's http.server, one request at a time, a client that waits 5-40 ms
# between requests) watched by `tbneck capture -i lo --serve` until the client is done, in a
# network namespace of its own. Issue 12 found 45% of the windows congested
# and 429 episodes per minute on such a server (N* 0.04). Now:
#   - the live event stream carries window events and no episode event;
#   - the end-of-capture summary has no episode for the tier and says why;
#   - the report has every request the client got an answer to (the
#     client's own count is the oracle), no congested window and no episode,
#     for the tier and its server, with n_star_status other than "knee".
set -uo pipefail
: "${TBNECK:?}" "${TB_BUILDDIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespaces, packet sockets)"; exit 77; }
command -v python3 >/dev/null || fail "python3 missing (scripts/deps.sh)"
command -v curl >/dev/null || fail "curl missing (scripts/deps.sh)"

ns="tbidle$$"
work=$(mktemp -d "$TB_BUILDDIR/e2e-live-idle.XXXXXX")
cap_pid="" srv_pid="" sse_pid=""
cleanup() {
  for p in $cap_pid $srv_pid $sse_pid; do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
ip netns add "$ns" || fail "ip netns add"
ip -n "$ns" link set lo up || fail "lo up"

# The server on a free port of the namespace's own loopback.
ip netns exec "$ns" python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$work" \
  >"$work/srv.out" 2>&1 &
srv_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/.*port \([0-9][0-9]*\).*/\1/p' "$work/srv.out" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/srv.out"; fail "http.server did not start"; }
echo hello >"$work/index.html"

ip netns exec "$ns" "$TBNECK" capture -i lo -f "tcp port $port" --duration 40s \
  --db "$work/live.db" --serve 127.0.0.1:0 >"$work/live.out" 2>"$work/live.err" &
cap_pid=$!
for _ in $(seq 1 100); do
  grep -qs 'capturing on lo' "$work/live.err" && break
  kill -0 "$cap_pid" 2>/dev/null || { cat "$work/live.err"; fail "live capture exited early"; }
  sleep 0.1
done
grep -q 'capturing on lo' "$work/live.err" || fail "live capture did not start"
web=$(sed -n 's#.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$work/live.err")
[ -n "$web" ] || fail "no dashboard address printed"
ip netns exec "$ns" curl -sN --max-time 45 "http://127.0.0.1:$web/api/stream" \
  >"$work/sse.out" 2>/dev/null &
sse_pid=$!

# The client: one request at a time for 10 s (bounded by time and count).
ip netns exec "$ns" python3 - "$port" >"$work/client.out" <<'PY' || fail "client"
import http.client, random, sys, time
port = int(sys.argv[1])
random.seed(12)
end, n = time.time() + 10, 0
while time.time() < end and n < 2000:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", "/index.html")
    r = c.getresponse()
    r.read()
    c.close()
    n += r.status == 200
    time.sleep(random.uniform(0.005, 0.04))
print(n)
PY
answered=$(cat "$work/client.out")
[ "$answered" -gt 100 ] || fail "the client got only $answered answers"
ok "client: $answered requests answered, one at a time"

# Stopped by SIGINT once the client is done (not by --duration alone: on a
# loaded machine the client may start seconds late, and its last requests
# would fall after a fixed duration and be missing from the database).
sleep 1
kill -INT "$cap_pid" 2>/dev/null
for _ in $(seq 1 200); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$cap_pid" 2>/dev/null && fail "live capture did not stop after SIGINT"
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/live.err"; fail "live capture exit $rc"; }
wait "$sse_pid" 2>/dev/null
sse_pid=""
cat "$work/live.out"
grep -qi 'sanitizer\|runtime error' "$work/live.err" && { cat "$work/live.err"; fail "sanitizer"; }

nwin=$(grep -c '^event: window' "$work/sse.out")
nep=$(grep -c '^event: episode' "$work/sse.out")
[ "$nwin" -gt 50 ] || fail "live stream: only $nwin window events"
[ "$nep" -eq 0 ] || { grep -A1 '^event: episode' "$work/sse.out" | head; fail "live stream: $nep episode events"; }
ok "live stream: $nwin window events, no episode"

tier="http-$port"
line=$(grep "^  tier $tier " "$work/live.out") || fail "no end-of-capture line for tier $tier"
echo "$line" | grep -q "episode" && fail "end-of-capture summary reports episodes: $line"
echo "$line" | grep -Eq "no congestion|undetermined" || fail "no reason in: $line"
ok "end of capture: ${line#  }"

"$TBNECK" report --tier "$tier" --db "$work/live.db" --format json >"$work/rep.json" ||
  fail "report on the live database"
python3 - "$work/rep.json" "$answered" <<'PY' || fail "report"
import json, sys
r = json.load(open(sys.argv[1]))
answered = int(sys.argv[2])
bad = []
if r["requests"] != answered:
    bad.append("requests %d, the client got %d answers" % (r["requests"], answered))
for who in [r] + r["servers"]:
    name = who.get("server", "*")
    if who["congested_fraction"] != 0 or who["episodes"]:
        bad.append("%s: %.1f%% congested, %d episodes" % (name, 100 * who["congested_fraction"],
                                                           len(who["episodes"])))
    if who["n_star_status"] == "knee":
        bad.append("%s: a knee at %s" % (name, who["threshold"]))
print("report: %d requests, load max %.3f; %s" % (r["requests"], r["load"]["max"],
                                                  r["n_star_reason"]))
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PY
ok "report: no congested window, no episode"
echo PASS
