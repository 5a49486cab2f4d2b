# SPDX-License-Identifier: MIT
# e2e_common.sh — sourced by the end-to-end tests that start real servers on
# loopback: a private work folder cleaned up on exit with every process the
# test started, free ports, the tcpdump tap, a bounded wrk run and tbneck's
# capture and export. Every failure is one "FAIL: …" line and exit 1.

work=$(mktemp -d)
pids=()
e2e_cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${TB_KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi # TB_KEEP=1: debug
}
trap e2e_cleanup EXIT
chmod 755 "$work" # servers' workers run unprivileged

# need CMD... — every command must be installed (scripts/deps.sh installs them).
need() {
    local p
    for p in "$@"; do
        command -v "$p" >/dev/null || { echo "FAIL: $p not installed (scripts/deps.sh)"; exit 1; }
    done
}

freeport() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tap_start FILTER — tcpdump on lo into $work/cap.pcap, nanosecond stamps.
tap_start() {
    tcpdump -i lo -s 0 -B 32768 --time-stamp-precision=nano -U -w "$work/cap.pcap" "$1" \
        2>"$work/tcpdump.err" &
    tap_pid=$!
    pids+=($tap_pid)
    for _ in $(seq 50); do grep -q listening "$work/tcpdump.err" 2>/dev/null && break; sleep 0.1; done
    sleep 0.2
}

# tap_stop — ends the capture; a capture with drops would test the drops.
tap_stop() {
    sleep 1.2 # tcpdump hands over its buffer at least once a second
    kill -INT "$tap_pid"
    wait "$tap_pid" 2>/dev/null || true
    grep -q "^0 packets dropped by kernel" "$work/tcpdump.err" ||
        { cat "$work/tcpdump.err"; echo "FAIL: tcpdump dropped packets"; exit 1; }
}

# wrk_bounded N CONNECTIONS URL — wrk on one thread that stops after N
# responses (or 10 s), its output in $work/wrk-<n>.out.
wrk_runs=0
wrk_bounded() {
    [ -f "$work/stop.lua" ] || cat >"$work/stop.lua" <<'EOF'
local n = 0
local limit = tonumber(os.getenv("TB_WRK_RESPONSES"))
response = function(status, headers, body)
    n = n + 1
    if n >= limit then wrk.thread:stop() end
end
EOF
    wrk_runs=$((wrk_runs + 1))
    TB_WRK_RESPONSES=$1 timeout 20 wrk -t1 -c"$2" -d10s -s "$work/stop.lua" "$3" \
        >"$work/wrk-$wrk_runs.out" 2>&1
}

# tbneck_requests — capture $work/cap.pcap into $work/t.db, export the
# requests to $work/requests.csv.
tbneck_requests() {
    "$TBNECK" capture -r "$work/cap.pcap" --db "$work/t.db" >"$work/capture.out" 2>&1 ||
        { cat "$work/capture.out"; echo "FAIL: tbneck capture"; exit 1; }
    "$TBNECK" export requests --db "$work/t.db" >"$work/requests.csv"
}
