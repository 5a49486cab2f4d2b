#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_hostile.sh — issue 13, the short version of scripts/soak_hostile.sh:
# hostile clients (pipelining ending in "Connection: close", vanishing
# clients and event-stream readers, a burst of 1000 simultaneous complete
# requests, slowloris, garbage, foreign Host names) against `tbneck serve`
# and against a live `tbneck capture -i lo --serve` that watches that very
# traffic. The oracle is the client's view of the wire (tests/e2e/lib/
# hostile.py): every complete request answered with 200/4xx/503, in order;
# afterwards the process is alive, SIGTERM ends it with exit 0, and the
# capture prints its summary and the final analysis of what it saw.
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"

work=$(mktemp -d "$TB_BUILDDIR/e2e-hostile.XXXXXX")
cap_pid=""
trap 'stop_serve; [ -n "$cap_pid" ] && kill -KILL "$cap_pid" 2>/dev/null; rm -rf "$work"' EXIT
hostile="$TB_SRCDIR/tests/e2e/lib/hostile.py"

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/sim" -q || fail "simulator"
"$TBNECK" capture -r "$work/sim.pcap" --db "$work/web.db" -q || fail "offline capture"

# 1. tbneck serve. The first client is the one-liner that used to kill it
#    with SIGPIPE: two pipelined requests, then hang up without reading.
start_serve "$work/web.db" "$work"
for _ in 1 2 3; do
  (exec 3<>"/dev/tcp/127.0.0.1/$port"
   printf 'GET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&3
   exec 3>&-) 2>/dev/null
done
sleep 0.3
kill -0 "$serve_pid" 2>/dev/null || fail "serve died after clients hung up on pipelined answers"
ok "serve survives clients that hang up mid-answer"
timeout 60 python3 "$hostile" "127.0.0.1:$port" --seconds 6 --tier mysql --burst 1000 \
  --burst-every 30 >"$work/serve.json" 2>"$work/hostile.err"
rc=$?
cat "$work/serve.json"
[ "$rc" -eq 0 ] || { cat "$work/hostile.err"; fail "serve: a request went unanswered or was answered wrongly"; }
python3 - "$work/serve.json" <<'PY' || fail "serve: the mix did not run in full"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bursts"] >= 1 and d["sent"] >= 1000 and d["vanished"] > 0 and d["garbage"] > 0, d
assert d["status"].get("403", 0) > 0 and d["status"].get("505", 0) > 0, d["status"]
PY
kill -0 "$serve_pid" 2>/dev/null || fail "serve died under hostile clients"
stop_serve
[ "$serve_rc" = 0 ] || { tail -5 "$work/serve.err"; fail "serve: exit $serve_rc after SIGTERM, want 0"; }
grep -qi 'sanitizer\|runtime error' "$work/serve.err" && { cat "$work/serve.err"; fail "sanitizer report"; }
ok "serve: every request answered, alive, exit 0 on SIGTERM"

# 2. A live capture on lo serving the dashboard, and capturing the traffic
#    to it (so the final analysis has a tier to analyse).
start_live_serve "$work/live.db" "$work"
for _ in 1 2 3; do
  (exec 3<>"/dev/tcp/127.0.0.1/$lport"
   printf 'GET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /app.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&3
   exec 3>&-) 2>/dev/null
done
timeout 60 python3 "$hostile" "127.0.0.1:$lport" --seconds 5 --burst 500 --burst-every 30 \
  >"$work/live.json" 2>"$work/hostile-live.err"
rc=$?
cat "$work/live.json"
[ "$rc" -eq 0 ] || { cat "$work/hostile-live.err"; fail "live --serve: a request went unanswered"; }
kill -0 "$cap_pid" 2>/dev/null || { cat "$work/cap.err"; fail "live capture died under hostile clients"; }
sleep 1.5 # let a window close past the grace
kill -TERM "$cap_pid"
for _ in $(seq 1 300); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
wait "$cap_pid"
rc=$?
cap_pid=""
[ "$rc" -eq 0 ] || { cat "$work/cap.err"; fail "live capture: exit $rc after SIGTERM, want 0"; }
grep -q '^capture lo: .* requests, .*(interrupted)' "$work/cap.out" ||
  { cat "$work/cap.out" "$work/cap.err"; fail "live capture: no summary"; }
grep -qE "^  tier http-$lport +[0-9]+ requests, (N\* |N\* undetermined|undetermined: |no congestion: )" "$work/cap.out" ||
  { cat "$work/cap.out"; fail "live capture: no final analysis of tier http-$lport"; }
grep -qi 'sanitizer\|runtime error' "$work/cap.err" && { cat "$work/cap.err"; fail "sanitizer report"; }
[ ! -e "$work/live.db-wal" ] || fail "live capture left its -wal file"
ok "live capture --serve: every request answered, summary and final analysis, exit 0"
echo "PASS e2e_hostile"
