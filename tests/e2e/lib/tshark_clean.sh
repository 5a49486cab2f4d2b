# SPDX-License-Identifier: MIT
# tshark_clean.sh — sourced by the simulator's e2e tests: tshark_clean PCAP
# fails, printing up to five of them, when tshark finds a malformed packet, a
# TCP or protocol warning or error, or a bad IPv4 or TCP checksum in PCAP.
tshark_clean() {
    local bad
    bad=$(tshark -r "$1" -o tcp.check_checksum:TRUE -o ip.check_checksum:TRUE \
        -Y '_ws.malformed || _ws.expert.severity >= 6291456 || ip.checksum.status == 0 ||
            tcp.checksum.status == 0' 2>/dev/null | head -5)
    if [ -n "$bad" ]; then
        echo "FAIL: tshark flags packets of $(basename "$1"):"
        echo "$bad"
        return 1
    fi
}
