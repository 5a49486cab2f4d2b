#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_connections.sh — `tbneck export connections` lists every TCP connection
# of a simulated capture exactly as tshark's TCP streams see them (endpoints,
# first and last packet to the nanosecond, packets, payload bytes each way,
# SYN/mid-stream opening, FIN/end closing), with the requests each carried
# equal to the simulator's truth; idle pooled connections (no request) and,
# with a tap started late, connections opened before the capture included.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

check() { # check NAME CONFIG [sim options...]
    local name=$1 conf=$2
    shift 2
    echo "== $name: $(basename "$conf") $*"
    "$TBNECK_SIM" "$conf" --out "$work/$name" -q "$@"
    "$TBNECK" capture -q -r "$work/$name.pcap" --db "$work/$name.db"
    "$TBNECK" export connections --db "$work/$name.db" >"$work/$name.conns.csv"
    tshark -r "$work/$name.pcap" -T fields -E separator=, -e tcp.stream -e ip.src \
        -e tcp.srcport -e ip.dst -e tcp.dstport -e tcp.flags.syn -e tcp.flags.ack \
        -e tcp.flags.fin -e tcp.flags.reset -e tcp.len -e frame.time_epoch \
        >"$work/$name.tshark.csv" 2>/dev/null
    python3 "$TB_SRCDIR/tests/e2e/lib/conn_compare.py" "$work/$name.tshark.csv" \
        "$work/$name.requests.csv" "$work/$name.conns.csv" 80,8080,3306 || fail=1
}

check quick "$TB_SRCDIR/sim/examples/quick.conf"
check late "$TB_SRCDIR/sim/examples/quick.conf" --capture-from 1s

# What the runs must have covered: pooled connections that never carried a
# request, closes by FIN, and connections picked up mid-stream.
python3 - "$work" <<'PY' || fail=1
import csv, sys
w = sys.argv[1]
q = list(csv.DictReader(open(f"{w}/quick.conns.csv")))
late = list(csv.DictReader(open(f"{w}/late.conns.csv")))
need = [
    (any(r["requests"] == "0" and r["client_tier"] for r in q), "an idle pooled connection"),
    (any(r["closed"] == "fin" for r in q), "a connection closed by FIN"),
    (any(r["opened"] == "midstream" and r["client_tier"] == "http-8080" for r in late),
     "a pooled database connection picked up mid-stream"),
    ({r["server_tier"] for r in q} == {"http", "http-8080", "mysql"}, "three server tiers"),
]
ok = True
for cond, what in need:
    if not cond:
        print("COVERAGE: missing", what)
        ok = False
sys.exit(0 if ok else 1)
PY

# --tier keeps the connections to or from the tier; an unknown tier is an error.
"$TBNECK" export connections --tier mysql --db "$work/quick.db" >"$work/m.csv"
awk -F, 'NR > 1 && $4 != "mysql" && $5 != "mysql" { bad = 1 } END { exit bad }' "$work/m.csv" ||
    { echo "FAIL: --tier mysql exported a connection of another tier"; fail=1; }
[ "$(wc -l <"$work/m.csv")" -gt 1 ] || { echo "FAIL: --tier mysql exported nothing"; fail=1; }
set +e
"$TBNECK" export connections --tier nosuch --db "$work/quick.db" >/dev/null 2>"$work/err"
rc=$?
set -e
[ $rc -eq 1 ] && [ "$(wc -l <"$work/err")" -eq 1 ] ||
    { echo "FAIL: unknown tier: exit $rc, stderr: $(cat "$work/err")"; fail=1; }
exit $fail
