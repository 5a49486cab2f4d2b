#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# soak_hostile.sh — issue 13's hostile-client soak, the long version of
# tests/e2e/e2e_hostile.sh: for SECONDS (default 60) each, the mix of
# tests/e2e/lib/hostile.py (pipelining ending in "Connection: close",
# vanishing clients and event-stream readers, 1000-connection bursts,
# slowloris, garbage, foreign Host names) against `tbneck serve`, then against
# a live `tbneck capture -i lo --serve` that captures the very traffic.
# Afterwards: the process is alive, every complete request was answered
# (200/4xx/503, hostile.py's view of the wire), SIGTERM ends it with exit 0,
# and the capture prints its summary and final analysis. Prints hostile.py's
# counts for each run and the process's peak memory. Needs root (capture on lo).
#
#   scripts/soak_hostile.sh [SECONDS] [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
build=${2:-build}
export TBNECK=$PWD/$build/tbneck TBNECK_SIM=$PWD/$build/sim/tbneck-sim TB_SRCDIR=$PWD
export TB_BUILDDIR=$PWD/$build
[ -x "$TBNECK" ] || { echo "soak_hostile: build first ($TBNECK missing)"; exit 2; }
[ "$(id -u)" = 0 ] || { echo "soak_hostile: needs root (captures on lo)"; exit 2; }
source tests/e2e/web/common.sh
hostile=tests/e2e/lib/hostile.py
work=$(mktemp -d "$TB_BUILDDIR/soak-hostile.XXXXXX")
cap_pid=""
trap 'stop_serve; [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null; rm -rf "$work"' EXIT
vmhwm() { sed -n 's/^VmHWM: *//p' "/proc/$1/status" 2>/dev/null; }

"$TBNECK_SIM" sim/examples/quick.conf --out "$work/sim" -q || fail "simulator"
"$TBNECK" capture -r "$work/sim.pcap" --db "$work/web.db" -q || fail "offline capture"

echo "== tbneck serve, $secs s"
start_serve "$work/web.db" "$work"
t0=$(date +%s)
timeout $((secs + 120)) python3 "$hostile" "127.0.0.1:$port" --seconds "$secs" --tier mysql \
    --burst 1000 --burst-every 15 >"$work/serve.json" 2>"$work/hostile.err"
rc=$?
echo "hostile.py: $(cat "$work/serve.json") ($(($(date +%s) - t0)) s)"
[ "$rc" -eq 0 ] || { tail -20 "$work/hostile.err"; fail "serve: a request went unanswered"; }
kill -0 "$serve_pid" 2>/dev/null || fail "serve died"
echo "serve peak memory: $(vmhwm "$serve_pid")"
stop_serve
[ "$serve_rc" = 0 ] || { tail -5 "$work/serve.err"; fail "serve: exit $serve_rc after SIGTERM"; }
ok "serve: alive after $secs s, every request answered, exit 0 on SIGTERM"

echo "== tbneck capture -i lo --serve, $secs s"
start_live_serve "$work/live.db" "$work"
t0=$(date +%s)
timeout $((secs + 120)) python3 "$hostile" "127.0.0.1:$lport" --seconds "$secs" --burst 1000 \
    --burst-every 15 >"$work/live.json" 2>"$work/hostile-live.err"
rc=$?
echo "hostile.py: $(cat "$work/live.json") ($(($(date +%s) - t0)) s)"
[ "$rc" -eq 0 ] || { tail -20 "$work/hostile-live.err"; fail "live --serve: a request went unanswered"; }
kill -0 "$cap_pid" 2>/dev/null || { cat "$work/cap.err"; fail "live capture died"; }
echo "capture peak memory: $(vmhwm "$cap_pid")"
sleep 1.5
kill -TERM "$cap_pid"
for _ in $(seq 1 300); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/cap.err"; fail "live capture: exit $rc after SIGTERM"; }
grep -q '^capture lo: .* requests' "$work/cap.out" || { cat "$work/cap.out"; fail "no summary"; }
grep -qE "^  tier http-$lport +[0-9]+ requests" "$work/cap.out" ||
    { cat "$work/cap.out"; fail "no final analysis"; }
sed -n '1,3p' "$work/cap.out"
grep -E 'abandoned|unanswered' "$work/cap.err" || true
echo "stored: $(sqlite3 "$work/live.db" "SELECT state, requests, requests_seen, abandoned FROM captures")"
ok "live capture --serve: alive after $secs s, every request answered, summary, final analysis, exit 0"
echo "PASS soak_hostile"
