#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_sim_impair.sh — tbneck on impaired tbneck-sim captures. With 1% of the
# packets dropped, exactly the truth requests that kept their first request
# packet and last response packet (the best possible) come out with exact
# times, and no reported request strays beyond the span of the packets that
# were lost (PREFIX.dropped.csv lists them). With 1% of the packets duplicated
# every request is still exact; with 1% swapped with their successor (each
# keeping its own timestamp) every request whose request packet still comes
# before its response in the file is exact (sim_compare.py "reordered" says
# why the others cannot be). Impairments never change the truth.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmp_py="$TB_SRCDIR/tests/e2e/lib/sim_compare.py"
conf="$TB_SRCDIR/sim/examples/quick.conf"
fail=0

"$TBNECK_SIM" "$conf" --out "$work/clean" -q

echo "== 1% of packets dropped"
"$TBNECK_SIM" "$conf" --out "$work/drop" -q --drop 0.01
cmp "$work/clean.requests.csv" "$work/drop.requests.csv" ||
    { echo "FAIL: --drop changed the truth"; fail=1; }
ndrop=$(($(wc -l <"$work/drop.dropped.csv") - 1))
[ "$ndrop" -gt 50 ] || { echo "FAIL: only $ndrop packets dropped"; fail=1; }
"$TBNECK" capture -q -r "$work/drop.pcap" --db "$work/drop.db"
"$TBNECK" export requests --db "$work/drop.db" >"$work/drop.export.csv"
python3 "$cmp_py" impaired "$work/drop.requests.csv" "$work/drop.export.csv" \
    "$work/drop.dropped.csv" best "$work/drop.pcap" || fail=1

echo "== 1% duplicated"
"$TBNECK_SIM" "$conf" --out "$work/dup" -q --duplicate 0.01
cmp "$work/clean.requests.csv" "$work/dup.requests.csv" ||
    { echo "FAIL: --duplicate changed the truth"; fail=1; }
"$TBNECK" capture -q -r "$work/dup.pcap" --db "$work/dup.db"
"$TBNECK" export requests --db "$work/dup.db" >"$work/dup.export.csv"
python3 "$cmp_py" exact "$work/dup.requests.csv" "$work/dup.export.csv" || fail=1

echo "== 1% reordered"
"$TBNECK_SIM" "$conf" --out "$work/reo" -q --reorder 0.01
cmp "$work/clean.requests.csv" "$work/reo.requests.csv" ||
    { echo "FAIL: --reorder changed the truth"; fail=1; }
"$TBNECK" capture -q -r "$work/reo.pcap" --db "$work/reo.db"
"$TBNECK" export requests --db "$work/reo.db" >"$work/reo.export.csv"
python3 "$cmp_py" reordered "$work/reo.requests.csv" "$work/reo.export.csv" "$work/reo.pcap" || fail=1

echo "== snaplen 200: truncated packets are written with their original length"
"$TBNECK_SIM" "$conf" --out "$work/snap" -q --snaplen 200
python3 - "$work/snap.pcap" "$work/clean.pcap" <<'PY' || fail=1
import struct, sys
def recs(p):
    d = open(p, "rb").read()
    out, off = [], 24
    while off < len(d):
        s, ns, cap, ln = struct.unpack_from("<IIII", d, off)
        out.append((s, ns, cap, ln)); off += 16 + cap
    return d, out
sd, snap = recs(sys.argv[1]); _, clean = recs(sys.argv[2])
ok = struct.unpack_from("<I", sd, 16)[0] == 200 and len(snap) == len(clean)
ok = ok and all(a[3] == b[3] and a[2] == min(200, b[3]) and a[:2] == b[:2]
                for a, b in zip(snap, clean))
print(f"snaplen: {len(snap)} packets, {sum(1 for r in snap if r[2] < r[3])} cut, header snaplen "
      f"{struct.unpack_from('<I', sd, 16)[0]}: {'OK' if ok else 'WRONG'}")
sys.exit(0 if ok else 1)
PY

[ "$fail" -eq 0 ] && echo "e2e_sim_impair: OK"
exit "$fail"
