#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_prometheus.sh — GET /metrics scraped by a real Prometheus (Debian's
# `prometheus` package). In a network namespace of its own (a veth pair and
# its own loopback, so every port is private):
#   - the simulator's garbage-collection case (sim/examples/gc.conf: two
#     application servers that freeze) is captured offline and served by
#     `tbneck serve` (job "serve"), and
#   - a smaller simulated capture (tests/e2e/lib/live_freeze.conf) is
#     replayed by tcpreplay into the veth while `tbneck capture -i --serve`
#     listens (job "live");
# Prometheus scrapes both every second. Then, over Prometheus' HTTP API
# (tests/e2e/lib/prom_check.py): serve's load of every tier and server equals
# the latest window of /api/windows and of `tbneck export windows`; requests
# equal the simulator's truth; episode counts by kind, N* and the congested
# share equal the API's; the live capture's every scraped load equals the
# stored window it names (export windows after the capture), its congested
# flag the live stream's, its packet counter tcpreplay's count; every query of
# contrib/grafana/tbneck.json answers. `promtool check metrics` passes on
# both endpoints' output. The live capture also writes --format jsonl, and
# tests/e2e/lib/jsonl_check.py checks those lines and report --format jsonl.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}" "${TB_BUILDDIR:?}"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
[ "$(id -u)" -eq 0 ] || fail "needs root (network namespace, packet sockets)"
for c in prometheus promtool tcpreplay curl python3; do
  command -v "$c" >/dev/null || fail "$c missing (bash scripts/deps.sh installs it)"
done

ns="tbprom$$"
work=$(mktemp -d "$TB_BUILDDIR/e2e-prometheus.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
  if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
nsx() { ip netns exec "$ns" "$@"; }

ip netns add "$ns" || fail "ip netns add"
# No IPv6 on the pair: its router solicitations would be packets tcpreplay did not send.
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 ||
  fail "sysctl disable_ipv6"
ip -n "$ns" link add tbva type veth peer name tbvb || fail "veth pair"
for l in lo tbva tbvb; do ip -n "$ns" link set "$l" up || fail "link up $l"; done
ip -n "$ns" link set tbva mtu 65535 && ip -n "$ns" link set tbvb mtu 65535 || fail "mtu"

"$TBNECK_SIM" "$TB_SRCDIR/tests/e2e/lib/live_freeze.conf" --out "$work/sim" -q || fail "simulator"
# Served: the garbage-collection case, two application servers that freeze.
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/gc.conf" --out "$work/gc" -q || fail "simulator (gc.conf)"
"$TBNECK" capture -r "$work/gc.pcap" --db "$work/off.db" -q || fail "offline capture"

# wait_addr FILE SED-EXPR PID: the port a tbneck process printed.
wait_port() {
  local f=$1 re=$2 pid=$3 p=""
  for _ in $(seq 1 100); do
    p=$(sed -n "$re" "$f" 2>/dev/null)
    [ -n "$p" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "${f%.*}.err" "$f" >&2; fail "$f: process exited early"; }
    sleep 0.1
  done
  [ -n "$p" ] || fail "$f: no address printed"
  echo "$p"
}

ip netns exec "$ns" "$TBNECK" serve --db "$work/off.db" --listen 127.0.0.1:0 \
  >"$work/serve.out" 2>"$work/serve.err" &
serve_pid=$!
pids+=("$serve_pid")
sport=$(wait_port "$work/serve.out" 's#^serving http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$serve_pid")

ip netns exec "$ns" "$TBNECK" capture -i tbvb --duration 120s --db "$work/live.db" \
  --serve 127.0.0.1:0 --format jsonl >"$work/live.jsonl" 2>"$work/live.err" &
cap_pid=$!
pids+=("$cap_pid")
lport=$(wait_port "$work/live.err" 's#.*dashboard at http://127\.0\.0\.1:\([0-9]*\)/.*#\1#p' "$cap_pid")
for _ in $(seq 1 100); do grep -qs 'capturing on tbvb' "$work/live.err" && break; sleep 0.1; done
ip netns exec "$ns" curl -sN --max-time 120 "http://127.0.0.1:$lport/api/stream" \
  >"$work/sse.out" 2>/dev/null &
pids+=("$!")

# promtool's lint on both endpoints (the live one before any traffic too).
for p in "$sport" "$lport"; do
  nsx curl -sf --max-time 60 "http://127.0.0.1:$p/metrics" >"$work/m-$p.prom" ||
    fail "GET /metrics on port $p"
  nsx promtool check metrics <"$work/m-$p.prom" >"$work/promtool-$p.out" 2>&1 ||
    { cat "$work/promtool-$p.out"; fail "promtool check metrics (port $p)"; }
done
ok "promtool check metrics: serve ($(grep -vc '^#' "$work/m-$sport.prom") samples) and live"
ct=$(nsx curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$sport/metrics")
[ "$ct" = "text/plain; version=0.0.4; charset=utf-8" ] || fail "content type '$ct'"
st=$(nsx curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$sport/metrics")
[ "$st" = 405 ] || fail "POST /metrics: $st, want 405"

# Prometheus on the namespace's own loopback (nothing else listens there).
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: serve
    static_configs: [{targets: ['127.0.0.1:$sport']}]
  - job_name: live
    static_configs: [{targets: ['127.0.0.1:$lport']}]
EOF
nsx promtool check config "$work/prometheus.yml" >/dev/null || fail "promtool check config"
ip netns exec "$ns" prometheus --config.file="$work/prometheus.yml" \
  --storage.tsdb.path="$work/tsdb" --web.listen-address=127.0.0.1:9090 \
  >"$work/prometheus.log" 2>&1 &
prom_pid=$!
pids+=("$prom_pid")
for _ in $(seq 1 300); do
  nsx curl -sf --max-time 2 http://127.0.0.1:9090/-/ready >/dev/null 2>&1 && break
  kill -0 "$prom_pid" 2>/dev/null || { tail -20 "$work/prometheus.log"; fail "prometheus exited"; }
  sleep 0.2
done
nsx curl -sf http://127.0.0.1:9090/-/ready >/dev/null || fail "prometheus not ready in 60 s"
ok "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') scraping serve :$sport and live :$lport"

# The replay at the capture's own pace (13 s), as e2e_live_veth does it.
nsx timeout 100 chrt -f 10 tcpreplay -T nano -i tbva "$work/sim.pcap" >"$work/replay.out" 2>&1 ||
  { cat "$work/replay.out"; fail "tcpreplay"; }
sent=$(sed -n 's/.*Actual: \([0-9]*\) packets.*/\1/p' "$work/replay.out")
[ -n "$sent" ] || { cat "$work/replay.out"; fail "tcpreplay printed no packet count"; }
ok "replayed $sent packets"
# Windows close 1 s after their end (the grace); scrapes every second.
sleep 4

nsx python3 "$TB_SRCDIR/tests/e2e/lib/prom_check.py" during --prom http://127.0.0.1:9090 \
  --serve "http://127.0.0.1:$sport" --sent "$sent" || fail "checks during the capture"

kill -INT "$cap_pid"
wait "$cap_pid"
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/live.err"; fail "live capture exit $rc"; }
nsx python3 "$TB_SRCDIR/tests/e2e/lib/prom_check.py" after --prom http://127.0.0.1:9090 \
  --serve "http://127.0.0.1:$sport" --work "$work" --truth "$work/gc.requests.csv" \
  --grafana "$TB_SRCDIR/contrib/grafana/tbneck.json" || fail "checks against the stored analysis"
# The same live capture's JSON lines (--format jsonl), and report --format jsonl.
grep -q '^capture tbvb: ' "$work/live.err" || { cat "$work/live.err"; fail "no summary on stderr"; }
python3 "$TB_SRCDIR/tests/e2e/lib/jsonl_check.py" "$work" || fail "JSON lines"
echo "PASS e2e_prometheus"
