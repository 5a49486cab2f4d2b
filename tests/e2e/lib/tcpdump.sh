# SPDX-License-Identifier: MIT
# tcpdump.sh — sourced by the e2e tests: a nanosecond capture on loopback
# around what the test runs. Needs the caller's array `pids` (its EXIT trap
# stops what is listed there).

# tcpdump_start PCAP FILTER: starts tcpdump and waits until it listens; the
# pid is in $tcpdump_pid, its messages in PCAP.err.
tcpdump_start() {
    tcpdump -i lo -s 0 -B 32768 --time-stamp-precision=nano -U -w "$1" "$2" 2>"$1.err" &
    tcpdump_pid=$!
    pids+=("$tcpdump_pid")
    for _ in $(seq 50); do grep -q listening "$1.err" 2>/dev/null && break; sleep 0.1; done
    sleep 0.2
}

# tcpdump_stop PCAP: stops it once it has handed over its buffer; fails when
# the kernel dropped packets (the comparisons want a complete capture).
tcpdump_stop() {
    sleep 1.2 # tcpdump hands over its buffer at least once a second
    kill -INT "$tcpdump_pid"
    wait "$tcpdump_pid" 2>/dev/null || true
    grep -q "^0 packets dropped by kernel" "$1.err"
}
