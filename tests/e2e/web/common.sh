# SPDX-License-Identifier: MIT
# common.sh — helpers shared by the web e2e tests: build a database from the
# simulator, start `tbneck serve` on a free loopback port, clean up.
# Sourced; expects TBNECK, TBNECK_SIM, TB_SRCDIR, TB_BUILDDIR.

: "${TBNECK:?TBNECK not set}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

serve_pid=""
serve_rc=""
# Stops serve with SIGTERM; serve_rc gets its exit status (0 expected: a clean
# shutdown, and under ASan no leak report).
stop_serve() {
  if [ -n "$serve_pid" ]; then
    kill -TERM "$serve_pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$serve_pid" 2>/dev/null
    wait "$serve_pid" 2>/dev/null
    serve_rc=$?
  fi
  serve_pid=""
}

# make_db DIR CONF: simulates CONF into DIR/sim.pcap, captures it into DIR/web.db
# and runs `tbneck report` on every tier so analyses are stored.
make_db() {
  local dir=$1 conf=$2
  "$TBNECK_SIM" "$conf" --out "$dir/sim" -q || fail "simulator failed on $conf"
  "$TBNECK" capture -r "$dir/sim.pcap" --db "$dir/web.db" >"$dir/capture.out" 2>&1 ||
    { cat "$dir/capture.out"; fail "offline capture failed"; }
  local tiers
  tiers=$("$TBNECK" tiers --db "$dir/web.db" | awk 'NR > 1 && /^[^ ]/ {print $1}')
  for t in $tiers; do
    "$TBNECK" report --tier "$t" --window 50ms --db "$dir/web.db" --format json \
      >"$dir/report-$t.json" 2>"$dir/report-$t.err" || true
  done
}

# start_serve DB LOGDIR [extra args]: starts serve on port 0, sets $port.
start_serve() {
  local db=$1 dir=$2; shift 2
  "$TBNECK" serve --db "$db" --listen 127.0.0.1:0 "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
  serve_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's#^serving http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$dir/serve.out" 2>/dev/null)
    [ -n "$port" ] && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$dir/serve.err"; fail "serve exited early"; }
    sleep 0.1
  done
  [ -n "$port" ] || fail "serve did not print its address"
}

# start_live_serve DB DIR: a live capture on lo serving the dashboard on a free
# port and capturing the traffic to it (so its final analysis has a tier);
# sets $lport and $cap_pid, output in DIR/cap.out and DIR/cap.err. Root.
start_live_serve() {
  local db=$1 dir=$2
  lport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$TBNECK" capture -i lo --db "$db" --serve "127.0.0.1:$lport" --window 100ms \
    "tcp port $lport" >"$dir/cap.out" 2>"$dir/cap.err" &
  cap_pid=$!
  for _ in $(seq 1 100); do
    grep -q 'dashboard at' "$dir/cap.err" 2>/dev/null && break
    kill -0 "$cap_pid" 2>/dev/null || { cat "$dir/cap.err"; fail "live capture exited early"; }
    sleep 0.1
  done
  grep -q 'dashboard at' "$dir/cap.err" || { cat "$dir/cap.err"; fail "live capture: no dashboard"; }
}
