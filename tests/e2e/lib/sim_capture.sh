# SPDX-License-Identifier: MIT
# sim_capture.sh — sourced by the end-to-end tests on simulated traffic.
# sim CONF PREFIX [sim options...]: simulate with tbneck-sim and capture into
# PREFIX.db; the pcap is removed once captured (they are large). A failed
# capture prints one "FAIL: …" line and its output, and exits 1.
sim() {
    local conf=$1 p=$2; shift 2
    "$TBNECK_SIM" "$conf" --out "$p" -q "$@"
    "$TBNECK" capture -r "$p.pcap" --db "$p.db" >"$p.capture.out" 2>&1 ||
        { echo "FAIL: tbneck capture $p.pcap"; cat "$p.capture.out"; exit 1; }
    rm -f "$p.pcap"
}
