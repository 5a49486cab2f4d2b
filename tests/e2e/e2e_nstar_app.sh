#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_nstar_app.sh — N* of an application tier that waits on its calls
# (issue 12), through the whole pipeline: bench/nstar/appcpu.conf (two app
# servers with 2 cores, 4 ms of CPU per page around 3 queries of a database
# that never queues; bursts offer 1.7x the tier's capacity, between them it
# is 60% busy), seeds 1-3. The oracle is the simulator's expected.csv, from
# the configuration alone: cores x R/D = 4 x 1.375 = 5.5 for the tier. The
# report's threshold must be within 10% of it, and so must diagnose's n_star
# for the tier (`--recompute`: the same analysis fed request by request,
# tb_tierfeed, whose call lives are summed apart from the report's). Before v0.5b (the
# calm stretches' slope alone, no hint) these seeds read +28%, +24%, +29%.
set -uo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d "${TB_BUILDDIR:-/tmp}/e2e-nstar-app.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0
for seed in 1 2 3; do
  pre="$work/app_$seed"
  "$TBNECK_SIM" "$TB_SRCDIR/bench/nstar/appcpu.conf" --out "$pre" --seed "$seed" -q || {
    echo "seed $seed: tbneck-sim failed"; failed=1; continue; }
  "$TBNECK" capture -r "$pre.pcap" --db "$pre.db" -q || {
    echo "seed $seed: capture failed"; failed=1; continue; }
  "$TBNECK" report --tier http-8080 --db "$pre.db" --format json > "$pre.report.json" || {
    echo "seed $seed: report failed"; failed=1; continue; }
  "$TBNECK" diagnose --db "$pre.db" --format json --recompute > "$pre.diag.json" || {
    echo "seed $seed: diagnose failed"; failed=1; continue; }
  python3 - "$pre" "$seed" <<'PY' || failed=1
import csv, json, sys
pre, seed = sys.argv[1], sys.argv[2]
want = [float(r["expected_n_star"]) for r in csv.DictReader(open(pre + ".expected.csv"))
        if r["tier"] == "http-8080" and r["server"] == "*"][0]
rep = json.load(open(pre + ".report.json"))
diag = json.load(open(pre + ".diag.json"))
got = {"report threshold": rep["threshold"],
       "diagnose n_star": [t["n_star"] for t in diag["tiers"] if t["tier"] == "http-8080"][0]}
bad = False
for k, v in got.items():
    err = None if v is None else 100.0 * (v - want) / want
    ok = err is not None and abs(err) <= 10.0
    bad |= not ok
    print("seed %s: %s %s, expected %.2f (%s) %s" % (
        seed, k, v, want, "-" if err is None else "%+.1f%%" % err, "ok" if ok else "FAIL"))
sys.exit(1 if bad else 0)
PY
done
exit $failed
