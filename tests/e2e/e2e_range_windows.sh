#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_range_windows.sh — a window's load does not depend on the range an
# analysis was asked for. Windows are stored by (tier, server, width, start)
# and shared by every analysis of that width, so an analysis cut by
# --from/--to at a time inside a window (a dashboard zoom, `events report
# --from +10s`) must still count every request in flight in that window.
# Found on the real stack: after the 12-second close-up of `events report`,
# the stored boundary window held 0.87 instead of 2.08 and the full-range
# correlation changed. Oracle: the load of every window recomputed here from
# `export requests` (time-integral of the requests in flight / width).
set -uo pipefail
source "$TB_SRCDIR/tests/e2e/web/common.sh"
work=$(mktemp -d "$TB_BUILDDIR/e2e-range.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$TBNECK_SIM" "$TB_SRCDIR/sim/examples/quick.conf" --out "$work/q" --duration 6s -q ||
  fail "simulator"
db="$work/q.db"
"$TBNECK" capture -r "$work/q.pcap" --db "$db" -q || fail "capture"
"$TBNECK" export requests --db "$db" >"$work/req.csv" || fail "export requests"
for t in http http-8080 mysql; do
  # The whole range first (stored, and reused below), then ranges cut inside
  # windows at both ends, then the whole range again, read back.
  "$TBNECK" report --tier "$t" --window 50ms --db "$db" >/dev/null || fail "report --tier $t"
  "$TBNECK" report --tier "$t" --window 50ms --from +1.0123s --to +3.0371s --db "$db" \
    >/dev/null || fail "report --tier $t (range)"
  "$TBNECK" report --tier "$t" --window 50ms --from +2.5049s --to +4.2222s --db "$db" \
    --format json >/dev/null || fail "report --tier $t (range 2)"
  "$TBNECK" export windows --tier "$t" --window 50ms --db "$db" >"$work/win-$t.csv" ||
    fail "export windows --tier $t"
done
python3 - "$work/req.csv" "$work"/win-*.csv <<'PY' || fail "stored window loads differ from the requests"
import collections, csv, sys
W = 50_000_000
req = list(csv.DictReader(open(sys.argv[1])))
bad = checked = 0
for path in sys.argv[2:]:
    rows = list(csv.DictReader(open(path)))
    tier = rows[0]["tier"]
    # load per (server, window start): each request's time inside the window.
    load = collections.defaultdict(int)
    for r in req:
        if r["tier"] != tier:
            continue
        a, d = int(r["arrival_ns"]), int(r["departure_ns"])
        s = a // W * W
        while s < d or s == a:
            ov = min(d, s + W) - max(a, s)
            if ov > 0:
                load[(r["server"], s)] += ov
                load[("*", s)] += ov
            s += W
    for w in rows:
        key = (w["server"], int(w["start_ns"]))
        want = load.get(key, 0) / W
        checked += 1
        if abs(float(w["load"]) - want) > 1e-9 * max(1.0, want):
            bad += 1
            if bad <= 5:
                print("%s %s %s: stored load %s, from the requests %.9f"
                      % (tier, w["server"], w["start_ns"], w["load"], want))
print("%d windows checked, %d differ" % (checked, bad))
sys.exit(1 if bad or checked < 300 else 0)
PY
ok "every stored window's load equals the requests' own after analyses of cut ranges"
