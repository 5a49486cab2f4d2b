#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_sim_truth.sh — on clean tbneck-sim captures, `tbneck capture -r` reproduces
# the ground truth exactly (IPv4, IPv6 in 802.1Q, a tap started late): every
# request once, same tier, server, client and class (the class the
# configuration states, never computed by tbneck's code), arrival and departure to
# the nanosecond, same status; every connection with its tiers, open and close
# times and request count; and the simulator is deterministic (same seed,
# byte-identical pcap; PREFIX.truth.conf replays the run).
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmp_py="$TB_SRCDIR/tests/e2e/lib/sim_compare.py"
fail=0

check() { # check NAME CONFIG ALLOWED_FLAGS [sim options...]
    local name=$1 conf=$2 flags=$3
    shift 3
    echo "== $name: $(basename "$conf") $*"
    "$TBNECK_SIM" "$conf" --out "$work/$name" -q "$@"
    "$TBNECK" capture -q -r "$work/$name.pcap" --db "$work/$name.db"
    "$TBNECK" export requests --db "$work/$name.db" >"$work/$name.export.csv"
    python3 "$cmp_py" exact "$work/$name.requests.csv" "$work/$name.export.csv" "$flags" || fail=1
    # Every connection the tap saw, idle pooled ones and ones open before it too.
    "$TBNECK" export connections --db "$work/$name.db" >"$work/$name.conns.csv"
    python3 "$cmp_py" connections "$work/$name.connections.csv" "$work/$name.conns.csv" || fail=1
}

# The truth's classes are an independent oracle: the configurations state them
# (class.TIER, or the template rules of docs/sim.md); the simulator does not
# contain tbneck's fingerprint code, so a fault there cannot hide itself.
if nm "$TBNECK_SIM" | grep -E ' [TtWw] tb_fp_'; then
    echo "FAIL: tbneck-sim links tbneck's fingerprint code"
    fail=1
fi

check quick "$TB_SRCDIR/sim/examples/quick.conf" 0
check eof "$TB_SRCDIR/tests/e2e/lib/sim_eof.conf" 0
check v6 "$TB_SRCDIR/tests/e2e/lib/sim_v6.conf" 0
# A tap started 1 s in picks the pooled and keep-alive connections up
# mid-stream: the requests that begin after it are exact, flagged MIDSTREAM (4)
# at most.
check late "$TB_SRCDIR/sim/examples/quick.conf" 4 --capture-from 1s
grep -q '^http,\[fd00::2:1\]:80,\[fd00::1:' "$work/v6.requests.csv" ||
    { echo "FAIL: v6 run has no IPv6 front-tier requests"; fail=1; }

# The runs really covered what this test claims: three tiers, several servers
# per tier, freezes, connections closed and reopened (more user connections
# than users), MySQL errors, and multi-segment messages.
python3 - "$work" <<'PY' || fail=1
import csv, sys
w = sys.argv[1]
ok = True
def need(cond, what):
    global ok
    if not cond:
        print("COVERAGE:", what); ok = False
for name, users in (("quick", 40), ("eof", 60)):
    rows = list(csv.DictReader(open(f"{w}/{name}.requests.csv")))
    tiers = {r["tier"] for r in rows}
    need(tiers == {"http", "http-8080", "mysql"}, f"{name}: tiers {sorted(tiers)}")
    apps = {r["server"] for r in rows if r["tier"] == "http-8080"}
    need(len(apps) >= 2, f"{name}: app servers {sorted(apps)}")
    front = {(r["client"], r["conn"]) for r in rows if r["tier"] == "http"}
    need(len(front) > users, f"{name}: {len(front)} user connections for {users} users")
    freezes = list(csv.DictReader(open(f"{w}/{name}.freezes.csv")))
    need(len(freezes) >= 2, f"{name}: {len(freezes)} freezes")
quick = list(csv.DictReader(open(f"{w}/quick.requests.csv")))
need(any(r["status"] == "1205" for r in quick), "quick: no MySQL ERR 1205")
need(any(r["status"] == "404" for r in quick), "quick: no HTTP 404")
eof = list(csv.DictReader(open(f"{w}/eof.requests.csv")))
need(len({r["server"] for r in eof if r["tier"] == "mysql"}) == 2, "eof: two database servers")
need(any(r["status"] == "204" for r in eof), "eof: no HTTP 204")
# The database tier calls nothing: its expected N* is its core count (2 per
# server); the app tier, which waits on the database, expects more.
exp = {(r["tier"], r["server"]): r for r in csv.DictReader(open(f"{w}/eof.expected.csv"))}
need(exp[("mysql", "*")]["expected_n_star"] == "4.00", f"eof: mysql N* {exp[('mysql', '*')]}")
need(exp[("mysql", "10.0.4.2:3306")]["cores"] == "2", "eof: mysql server 2 cores")
need(float(exp[("http-8080", "*")]["expected_n_star"]) > 6,
     f"eof: app N* {exp[('http-8080', '*')]}")
sys.exit(0 if ok else 1)
PY

# Determinism: the same configuration and seed give the same bytes; another
# seed does not.
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/again" -q
for f in pcap requests.csv freezes.csv speed.csv expected.csv truth.conf; do
    cmp "$work/quick.$f" "$work/again.$f" || { echo "FAIL: quick.$f differs between runs"; fail=1; }
done
# The effective configuration written beside the truth reproduces the run.
"$TBNECK_SIM" "$work/eof.truth.conf" --out "$work/replay" -q
for f in pcap requests.csv truth.conf; do
    cmp "$work/eof.$f" "$work/replay.$f" ||
        { echo "FAIL: eof.truth.conf does not reproduce eof.$f"; fail=1; }
done
# --set: the configuration's own value changes nothing; another value changes
# the run, and its truth.conf (with the override written in) replays it.
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/same" -q --set tier.db.cores=2
for f in pcap requests.csv connections.csv causes.csv truth.conf; do
    cmp "$work/quick.$f" "$work/same.$f" || { echo "FAIL: --set to the same value changed $f"; fail=1; }
done
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/set" -q --set tier.db.cores=3 \
    --set tier.app.speedup=1.5
if cmp -s "$work/quick.pcap" "$work/set.pcap"; then
    echo "FAIL: --set tier.db.cores=3 gave the same pcap"
    fail=1
fi
grep -qx 'speedup = 1.5' "$work/set.truth.conf" || { echo "FAIL: speedup not in truth.conf"; fail=1; }
"$TBNECK_SIM" "$work/set.truth.conf" --out "$work/set2" -q
for f in pcap requests.csv causes.csv; do
    cmp "$work/set.$f" "$work/set2.$f" || { echo "FAIL: set.truth.conf does not replay $f"; fail=1; }
done
"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/other" -q --seed 2
if cmp -s "$work/quick.pcap" "$work/other.pcap"; then
    echo "FAIL: --seed 2 gave the same pcap as seed 1"
    fail=1
fi

# tshark, an independent decoder, finds no malformed packet, no TCP or
# protocol warning and no bad checksum, and agrees on the request times
# (scripts/deps.sh installs it; without it the test fails, it does not skip).
if ! command -v tshark >/dev/null; then
    echo "FAIL: tshark is needed"
    fail=1
else
    . "$TB_SRCDIR/tests/e2e/lib/tshark_clean.sh"
    for name in quick eof v6; do
        tshark_clean "$work/$name.pcap" || fail=1
    done
    tshark -r "$work/quick.pcap" -Y 'http.request or mysql.query' -T fields -E separator=, \
        -e frame.time_epoch -e ip.src -e tcp.srcport -e ip.dst -e tcp.dstport \
        >"$work/tshark.csv" 2>/dev/null
    python3 - "$work/quick.requests.csv" "$work/tshark.csv" <<'PY' || fail=1
import csv, sys
from decimal import Decimal
truth = {(r["client"], r["server"], int(r["arrival_ns"]))
         for r in csv.DictReader(open(sys.argv[1]))}
seen = {(f"{a}:{b}", f"{c}:{d}", int(Decimal(t) * 10**9))
        for t, a, b, c, d in csv.reader(open(sys.argv[2]))}
print(f"tshark: {len(seen)} requests, truth {len(truth)}, common {len(truth & seen)}")
for x in sorted(truth - seen)[:5]: print("  only in truth:", x)
for x in sorted(seen - truth)[:5]: print("  only in tshark:", x)
sys.exit(0 if truth == seen else 1)
PY
fi

[ "$fail" -eq 0 ] && echo "e2e_sim_truth: OK"
exit "$fail"
