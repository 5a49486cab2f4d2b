#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_web_chromium.sh — the dashboard in headless Chromium: a simulated stack
# with freezes is captured offline and reported, `tbneck serve` serves it, and
# playwright-core (driving Debian's /usr/bin/chromium) checks that the scatter
# has points, the timelines are drawn, the episode table has rows and the live
# stream connects. Then, live: in a network namespace of its own, a capture is
# replayed by tcpreplay into a veth pair while `tbneck capture -i --serve`
# listens, and the page must grow as windows arrive on the stream. Leaves
# screenshots in the build folder and prints their paths.
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the live part needs root (network namespace)"; exit 77; }

[ -x /usr/bin/chromium ] || fail "/usr/bin/chromium missing (bash scripts/deps.sh installs it)"
command -v node >/dev/null && command -v npm >/dev/null || fail "node/npm missing (scripts/deps.sh)"
webdir="$TB_SRCDIR/tests/e2e/web"
if [ ! -d "$webdir/node_modules/playwright-core" ]; then
  # Only the driver library; never a browser download.
  (cd "$webdir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 300 npm install --no-audit --no-fund \
     --loglevel=error) || fail "npm install playwright-core"
fi

work=$(mktemp -d "$TB_BUILDDIR/e2e-web-chromium.XXXXXX")
trap 'stop_serve; rm -rf "$work"' EXIT
make_db "$work" "$TB_SRCDIR/tests/e2e/lib/report_gc.conf"
start_serve "$work/web.db" "$work"
base="http://127.0.0.1:$port"

# The tier with the most episodes makes the fullest page.
tier=$(python3 - "$base" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
tiers = json.load(urllib.request.urlopen(base + "/api/tiers", timeout=60))["tiers"]
best = None
for t in tiers:
    n = json.load(urllib.request.urlopen(base + "/api/episodes?tier=%s&width=50ms" % t["name"],
                                         timeout=60))["count"]
    if best is None or n > best[0]:
        best = (n, t["name"])
print(best[1] if best and best[0] > 0 else "")
PY
)
[ -n "$tier" ] || fail "no tier of the simulated stack has episodes"
ok "tier with the most episodes: $tier"

mkdir -p "$TB_BUILDDIR/test-artifacts"
shot="$TB_BUILDDIR/test-artifacts/web_dashboard.png"
rm -f "$shot"
timeout 240 node "$webdir/check_dashboard.js" "$base/?tier=$tier&width=50ms" "$shot" ||
  fail "dashboard checks in Chromium"
[ -s "$shot" ] || fail "no screenshot"
echo "screenshot: $shot"
kill -0 "$serve_pid" || fail "serve died"
stop_serve
[ "$serve_rc" = 0 ] || { cat "$work/serve.err"; fail "serve exit status $serve_rc after SIGTERM"; }

# Live: the page follows a running capture.
[ "$(id -u)" -eq 0 ] || fail "the live part needs root (network namespace)"
ns="tbweb$$"
cap_pid=""
rp_pid=""
trap 'stop_serve; [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null;
      [ -n "$rp_pid" ] && kill -TERM "$rp_pid" 2>/dev/null; ip netns del "$ns" 2>/dev/null;
      rm -rf "$work"' EXIT
ip netns add "$ns" || fail "ip netns add"
ip -n "$ns" link add tbva type veth peer name tbvb || fail "veth pair"
for l in lo tbva tbvb; do ip -n "$ns" link set "$l" up; done
ip -n "$ns" link set tbva mtu 65535 && ip -n "$ns" link set tbvb mtu 65535 || fail "mtu"
ip netns exec "$ns" "$TBNECK" capture -i tbvb --duration 25s --db "$work/live.db" \
  --serve 127.0.0.1:0 >"$work/live.out" 2>"$work/live.err" &
cap_pid=$!
for _ in $(seq 1 100); do grep -qs 'capturing on' "$work/live.err" && break; sleep 0.1; done
lport=$(sed -n 's#.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$work/live.err")
[ -n "$lport" ] || { cat "$work/live.err"; fail "live capture printed no dashboard address"; }
# 2000 packets/s for up to 20 s: the quick stack's capture, bounded.
ip netns exec "$ns" timeout 30 tcpreplay -q -i tbva --pps 2000 --limit 40000 "$work/sim.pcap" \
  >/dev/null 2>&1 &
rp_pid=$!
sleep 3 # traffic first: tiers must exist before the page picks one
lshot="$TB_BUILDDIR/test-artifacts/web_dashboard_live.png"
ip netns exec "$ns" timeout 120 node "$webdir/check_dashboard.js" --live \
  "http://127.0.0.1:$lport/?tier=mysql" "$lshot" || fail "live dashboard checks in Chromium"
echo "screenshot: $lshot"
kill -INT "$cap_pid"
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/live.err"; fail "live capture exit $rc"; }
kill -TERM "$rp_pid" 2>/dev/null
wait "$rp_pid" 2>/dev/null
rp_pid=""
echo "PASS e2e_web_chromium"
