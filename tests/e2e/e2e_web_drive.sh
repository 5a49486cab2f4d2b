#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_web_drive.sh — the dashboard as operators drive it, in headless Chromium.
# The simulator's garbage-collection case (sim/examples/gc.conf: two
# application servers stop the world 27 times) is captured offline and
# served; tests/e2e/web/drive_dashboard.js then picks the frozen server (its
# freeze episodes must be the simulator's freezes of that server, one for
# one), zooms by dragging, hovers, reloads the URL, clicks an episode (each
# checked against the API). Then a plain `chromium --headless --screenshot
# --virtual-time-budget=5000` of the page must return within a bound and show
# the drawn timelines (pixels counted in the PNG by tests/e2e/lib/png_pixels.py);
# and so must one of a live capture's page with ?live=0 (in a namespace, a
# capture replayed by tcpreplay while `capture -i --serve` listens).
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"
[ "$(id -u)" -eq 0 ] || fail "needs root (network namespace for the live part)"
[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium missing (bash scripts/deps.sh installs it)"
command -v node >/dev/null && command -v npm >/dev/null || fail "node/npm missing (scripts/deps.sh)"
webdir="$TB_SRCDIR/tests/e2e/web"
if [ ! -d "$webdir/node_modules/playwright-core" ]; then
  (cd "$webdir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 300 npm install --no-audit --no-fund \
     --loglevel=error) || fail "npm install playwright-core"
fi

work=$(mktemp -d "$TB_BUILDDIR/e2e-web-drive.XXXXXX")
ns="tbdrv$$"
cap_pid=""
cleanup() {
  stop_serve
  [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$TB_BUILDDIR/test-artifacts"
art="$TB_BUILDDIR/test-artifacts"

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/gc.conf" --out "$work/gc" -q || fail "simulator"
"$TBNECK" capture -r "$work/gc.pcap" --db "$work/web.db" -q || fail "offline capture"
start_serve "$work/web.db" "$work"
base="http://127.0.0.1:$port"

# The frozen server's freezes from the simulator's truth, and its tier's name.
read -r srv tier < <(python3 - "$work" "$base" <<'PY'
import csv, json, sys, urllib.request
work, base = sys.argv[1:]
fr = list(csv.DictReader(open(work + "/gc.freezes.csv")))
srv = fr[0]["server"]
tiers = json.load(urllib.request.urlopen(base + "/api/tiers", timeout=60))["tiers"]
tier = [t["name"] for t in tiers if srv in t["servers"]][0]
json.dump({"server": srv, "freezes": [[r["start_ns"], r["end_ns"]] for r in fr
                                      if r["server"] == srv]}, open(work + "/freezes.json", "w"))
print(srv, tier)
PY
)
[ -n "$srv" ] && [ -n "$tier" ] || fail "no frozen server in the simulator's freezes"
ok "frozen server $srv of tier $tier"
timeout 240 node "$webdir/drive_dashboard.js" "$base" "$tier" "$work/freezes.json" \
  "$art/web_drive.png" || fail "driving the dashboard in Chromium"

# shot URL PNG: a plain headless screenshot must return (bounded) and show
# the load (blue), response-time (violet) and throughput (green) lines.
shot() {
  local url=$1 png=$2 t0 t1 out
  rm -f "$png"
  t0=$(date +%s)
  timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/chromium-profile" --window-size=1400,2400 \
    --virtual-time-budget=5000 --screenshot="$png" "$url" >"$work/chromium.log" 2>&1 ||
    { tail -5 "$work/chromium.log"; fail "chromium --headless --screenshot $url did not return (exit $?)"; }
  t1=$(date +%s)
  [ -s "$png" ] || fail "no screenshot of $url"
  out=$(python3 "$TB_SRCDIR/tests/e2e/lib/png_pixels.py" "$png" 30 37,99,235 124,58,237 22,163,74)
  read -r _ blue violet green <<<"$out"
  # Green is the throughput timeline, plus the scatter's fitted curve only when
  # the analysis found a knee (a live capture replayed in 5 s may have none:
  # 774 green pixels for a fully drawn page in one CI run); an undrawn
  # timeline leaves next to none of any colour.
  [ "$blue" -gt 800 ] && [ "$violet" -gt 500 ] && [ "$green" -gt 500 ] ||
    fail "screenshot of $url: the timelines are not drawn ($out pixels blue/violet/green)"
  ok "plain headless screenshot of $url returned in $((t1 - t0)) s, timelines drawn ($out)"
}
shot "$base/?tier=$tier&server=$srv" "$art/web_plain.png"
stop_serve
[ "$serve_rc" = 0 ] || fail "serve exit status $serve_rc after SIGTERM"

# Live: the page of a running capture, with ?live=0.
ip netns add "$ns" || fail "ip netns add"
ip -n "$ns" link add tbva type veth peer name tbvb || fail "veth pair"
for l in lo tbva tbvb; do ip -n "$ns" link set "$l" up; done
ip -n "$ns" link set tbva mtu 65535 && ip -n "$ns" link set tbvb mtu 65535 || fail "mtu"
"$TBNECK_SIM" "$TB_SRCDIR/tests/e2e/lib/live_freeze.conf" --out "$work/live" -q || fail "simulator"
ip netns exec "$ns" "$TBNECK" capture -i tbvb --duration 90s --db "$work/live.db" \
  --serve 127.0.0.1:0 >"$work/live.out" 2>"$work/live.err" &
cap_pid=$!
for _ in $(seq 1 100); do grep -qs 'capturing on' "$work/live.err" && break; sleep 0.1; done
lport=$(sed -n 's#.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$work/live.err")
[ -n "$lport" ] || { cat "$work/live.err"; fail "live capture printed no dashboard address"; }
ip netns exec "$ns" timeout 60 tcpreplay -q -i tbva --pps 6000 "$work/live.pcap" >/dev/null 2>&1 ||
  fail "tcpreplay"
sleep 2 # the last windows close
live=$(ip netns exec "$ns" curl -sf "http://127.0.0.1:$lport/api/health" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["live"])')
[ "$live" = True ] || fail "/api/health of a live capture says live=$live"
ok "/api/health of the live capture: live"
lt=$(ip netns exec "$ns" curl -sf "http://127.0.0.1:$lport/api/tiers" |
  python3 -c 'import json,sys; t=json.load(sys.stdin)["tiers"]; print(max(t, key=lambda x: x["requests"])["name"])')
shot_ns() { ip netns exec "$ns" bash -c "$(declare -f shot fail ok); work='$work' TB_SRCDIR='$TB_SRCDIR' shot '$1' '$2'"; }
shot_ns "http://127.0.0.1:$lport/?tier=$lt&live=0" "$art/web_plain_live.png" || fail "live page"
kill -INT "$cap_pid"
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/live.err"; fail "live capture exit $rc"; }
echo "PASS e2e_web_drive"
