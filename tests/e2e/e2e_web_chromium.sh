#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_web_chromium.sh — the dashboard in headless Chromium: a simulated stack
# with freezes is captured offline and reported, `tbneck serve` serves it, and
# playwright-core (driving Debian's /usr/bin/chromium) checks that the scatter
# has points, the timelines are drawn, the episode table has rows and the live
# stream connects. Leaves a screenshot in the build folder and prints its path.
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"

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
make_db "$work" "$TB_SRCDIR/sim/examples/quick.conf"
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
echo "PASS e2e_web_chromium"
