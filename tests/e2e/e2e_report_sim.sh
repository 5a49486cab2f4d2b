#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_report_sim.sh — tbneck's analysis of tbneck-sim captures against the
# simulator's ground truth (tests/e2e/lib/report_truth.py does the checking,
# independently of tbneck's code):
#  1. window loads and completions from `tbneck export windows` equal the
#     exact ones computed from the truth requests (relative error < 1e-9), for
#     every tier, one server, and two window widths; stored results are reused
#     and give the same bytes; a stored analysis tampered in SQLite is what
#     the next report serves, and --recompute restores the true figures;
#  2. N* within ±10% of the configured cores for a CPU-bound database, over
#     3 configurations (1, 2, 4 cores) x 5 seeds and the one-core seed 24
#     that issue 18 found +47%, by both estimates: the
#     least-squares knee and the intervention analysis; when the two differ
#     by more than 20% the report must say so; --window auto picks a width
#     of its list, says why, and N* there is within 10% too;
#  2b. a stack with no bottleneck: no congested window anywhere (3 seeds);
#  3. freeze episodes at 50 ms against the truth freezes of 100 ms or more:
#     every one found and nothing else (precision and recall 1: 26 of 26 over
#     seeds 1-2, what the code achieves), kind "freeze";
#  4. a CPU with three speed levels yields three throughput levels;
#  5. --plot writes a PNG and an SVG.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
lib="$TB_SRCDIR/tests/e2e/lib"
truth="python3 $lib/report_truth.py"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

source "$TB_SRCDIR/tests/e2e/lib/sim_capture.sh" # sim CONF PREFIX [options]

# ---- 1. loads ------------------------------------------------------------------
q="$work/quick"
sim "$TB_SRCDIR/sim/examples/quick.conf" "$q"
for tier in http http-8080 mysql; do
    "$TBNECK" export windows --tier "$tier" --window 50ms --db "$q.db" >"$work/w.csv"
    $truth loads "$work/w.csv" "$q.requests.csv" "$tier"
done
"$TBNECK" export windows --tier http-8080 --window 20ms --server 10.0.3.2:8080 --db "$q.db" \
    >"$work/w.csv"
$truth loads "$work/w.csv" "$q.requests.csv" http-8080 10.0.3.2:8080
"$TBNECK" export windows --tier mysql --window 100ms --db "$q.db" >"$work/w.csv"
$truth loads "$work/w.csv" "$q.requests.csv" mysql
# The second run reads the stored analysis; it must print the same windows,
# and so must a forced recomputation.
"$TBNECK" export windows --tier mysql --window 100ms --db "$q.db" >"$work/w2.csv"
"$TBNECK" export windows --tier mysql --window 100ms --db "$q.db" --recompute >"$work/w3.csv"
cmp "$work/w.csv" "$work/w2.csv" || { echo "FAIL: stored windows differ"; failed=1; }
cmp "$work/w.csv" "$work/w3.csv" || { echo "FAIL: recomputed windows differ"; failed=1; }
# The report counts every truth request of the tier.
"$TBNECK" report --tier mysql --db "$q.db" --format json >"$work/q.json"
python3 - "$work/q.json" "$q.requests.csv" <<'EOF' || failed=1
import csv, json, sys
rep = json.load(open(sys.argv[1]))
n = sum(1 for r in csv.DictReader(open(sys.argv[2])) if r["tier"] == "mysql")
ok = rep["requests"] == n and rep["window_ns"] == 50000000 and rep["tier"] == "mysql"
print("report: mysql %d requests (truth %d), window %d" % (rep["requests"], n, rep["window_ns"]))
sys.exit(0 if ok else 1)
EOF
# ---- 2. N* ------------------------------------------------------------------------
: >"$work/nstar.txt"
for cores in 1 2 4; do
    for seed in 1 2 3 4 5; do
        p="$work/cpu${cores}_$seed"
        sim "$lib/report_cpu$cores.conf" "$p" --seed "$seed"
        "$TBNECK" report --tier mysql --db "$p.db" --format json >"$p.json"
        $truth nstar "$p.json" "$p.expected.csv" mysql "cores=$cores/seed=$seed" \
            >>"$work/nstar.txt"
        if [ "$cores" = 2 ] && [ "$seed" = 1 ]; then
            # --window auto: a width from the documented list, the reason
            # printed, and at that width N* still within 10% of the cores.
            "$TBNECK" report --tier mysql --db "$p.db" --window auto --format json >"$p.auto.json"
            python3 - "$p.auto.json" <<'PY' || failed=1
import json, sys
r = json.load(open(sys.argv[1]))
w, why, thr = r["window_ns"], r.get("window_reason", ""), r["threshold"]
print("--window auto: %d ns, threshold %s: %s" % (w, thr, why))
ok = (w in [m * 1000000 for m in (10, 20, 50, 100, 200, 500, 1000)]
      and why.startswith("window ") and thr is not None and abs(thr - 2) <= 0.2)
sys.exit(0 if ok else 1)
PY
        fi
        rm -f "$p.db" "$p".*.csv
    done
done
# The one-core run issue 18 found +47% (seed 24: 84% of the windows
# congested, mean load 45, so the lowest windows already queue and their
# slope is under 70% of 1/u; they lie past half the knee 1/u gives, so the
# work unit's slope stands): within 10% like the others.
p="$work/cpu1_24"
sim "$lib/report_cpu1.conf" "$p" --seed 24
"$TBNECK" report --tier mysql --db "$p.db" --format json >"$p.json"
$truth nstar "$p.json" "$p.expected.csv" mysql "cores=1/seed=24" >>"$work/nstar.txt"
rm -f "$p.db" "$p".*.csv
echo "N* per run: label, intervention, fit, expected, error %, fit error %, disagree"
cat "$work/nstar.txt"
python3 - "$work/nstar.txt" <<'EOF' || failed=1
import sys
# The congestion point the simulator defines (cores) is where the asymptotes
# of the main sequence meet. Both estimates must land within 10% of it: the
# least-squares knee (n_star_fit), and the intervention analysis (n_star),
# which finds the plateau by the slope test and takes N* where δ_0·load meets
# it (docs/report.md, "N* as implemented"; taking the load where the slope
# test fires, as the paper does, scattered -48% … +5% here, because queueing
# inside 50 ms windows rounds the corner). When the two differ by more than
# 20% the report must say so.
bad = fine = 0
runs = [line.split() for line in open(sys.argv[1])]
for f in runs:
    err = f[6]
    if err == "nan" or abs(float(err)) > 10.0:
        print("FAIL: N* (fit) %s for %s: off by %s%% (more than 10%%)" % (f[3], f[1], err))
        bad += 1
    if f[5] != "nan" and abs(float(f[5])) <= 10.0:
        fine += 1
    else:
        print("FAIL: N* (intervention) %s for %s: off by %s%% (more than 10%%)"
              % (f[2], f[1], f[5]))
        bad += 1
    if f[2] != "nan" and f[3] != "nan":
        gap = abs(float(f[2]) - float(f[3])) / min(float(f[2]), float(f[3]))
        if gap > 0.2 and f[7] != "true":
            print("FAIL: %s: estimates %s and %s differ by %.0f%% without the warning"
                  % (f[1], f[2], f[3], 100 * gap))
            bad += 1
print("N*: fit within 10%% in %d of %d runs; intervention within 10%% in %d of %d"
      % (sum(1 for f in runs if f[6] != "nan" and abs(float(f[6])) <= 10.0), len(runs),
         fine, len(runs)))
sys.exit(1 if bad else 0)
EOF

# ---- 2b. no false alarm -------------------------------------------------------------
# A stack with no bottleneck (bench/nstar/light.conf: a 4-core database whose
# load stays under about 2, idle app servers), 3 seeds of 8 s: no tier and no
# server may show a congested window or an episode, and each says why.
for seed in 1 2 3; do
    p="$work/light_$seed"
    sim "$TB_SRCDIR/bench/nstar/light.conf" "$p" --seed "$seed" --duration 8s
    for tier in http http-8080 mysql; do
        "$TBNECK" report --tier "$tier" --db "$p.db" --format json >"$p.$tier.json"
    done
    python3 - "$p" "$seed" <<'PY' || failed=1
import json, sys
bad = []
for tier in ("http", "http-8080", "mysql"):
    r = json.load(open("%s.%s.json" % (sys.argv[1], tier)))
    for who in [r] + r["servers"]:
        name = tier + " " + who.get("server", "*")
        if who["congested_fraction"] != 0 or who["episodes"]:
            bad.append("%s: %.1f%% congested, %d episodes" % (
                name, 100 * who["congested_fraction"], len(who["episodes"])))
        if not who["n_star_reason"]:
            bad.append("%s: no reason given" % name)
print("light seed %s: %s" % (sys.argv[2], "; ".join(bad) if bad else
                             "no congested window in any tier or server"))
sys.exit(1 if bad else 0)
PY
    rm -f "$p.db" "$p".*.csv
done

# ---- 3. freezes ---------------------------------------------------------------------
tp=0; fp=0; found=0; total=0
for seed in 1 2; do
    p="$work/gc_$seed"
    sim "$lib/report_gc.conf" "$p" --seed "$seed"
    "$TBNECK" report --tier http-8080 --window 50ms --db "$p.db" --format json >"$p.json"
    if [ "$seed" = 1 ] && command -v gnuplot >/dev/null; then
        # The plots: one PNG and one SVG image, the text report naming it.
        "$TBNECK" report --tier http-8080 --db "$p.db" --plot "$p.png" >"$p.txt"
        "$TBNECK" report --tier http-8080 --db "$p.db" --plot "$p.svg" --format json >/dev/null
        grep -q "^plot: $p.png$" "$p.txt" ||
            { echo "FAIL: report does not name its plot"; failed=1; }
        [ "$(head -c 8 "$p.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] ||
            { echo "FAIL: $p.png is not a PNG"; failed=1; }
        grep -q "<svg" "$p.svg" || { echo "FAIL: $p.svg is not an SVG"; failed=1; }
        grep -q "freeze" "$p.svg" || { echo "FAIL: the SVG lacks the freeze points"; failed=1; }
    fi
    out=$($truth freezes "$p.json" "$p.freezes.csv" 100000000)
    echo "$out"
    read -r _ a b c d <<<"$(tail -1 <<<"$out")"
    tp=$((tp + a)); fp=$((fp + b)); found=$((found + c)); total=$((total + d))
done
python3 - "$tp" "$fp" "$found" "$total" <<'EOF' || failed=1
import sys
tp, fp, found, total = map(int, sys.argv[1:])
prec = tp / (tp + fp) if tp + fp else 0.0
rec = found / total if total else 0.0
print("freeze episodes: precision %.3f (%d/%d), recall %.3f (%d/%d)"
      % (prec, tp, tp + fp, rec, found, total))
sys.exit(0 if total >= 10 and fp == 0 and found == total else 1)
EOF

# ---- stored analyses ----------------------------------------------------------------
# The stored analysis is what a second report serves: tampered in the
# database, the tampered figures come back; --recompute gives the true ones
# (and stores them again).
python3 - "$work/gc_1.db" "$TBNECK" <<'EOF' || failed=1
import json, sqlite3, subprocess, sys
db, tbneck = sys.argv[1:]
def report(*extra):
    out = subprocess.run([tbneck, "report", "--tier", "http-8080", "--db", db, "--format", "json",
                          *extra], check=True, capture_output=True, text=True).stdout
    return json.loads(out)
true = report()  # computed and stored (every estimate of this tier is determined)
con = sqlite3.connect(db)
n = con.execute("UPDATE analyses SET n_star = 123.25, n_star_fit = 77.5, tp_max = 4321.5, "
                "congested_fraction = 0.625 "
                "WHERE width_ns = 50000000 AND tier_id = (SELECT id FROM tiers WHERE name = "
                "'http-8080')").rowcount
con.commit()
con.close()
served = report()
recomputed = report("--recompute")
again = report()
print("stored analysis: %d rows tampered; served n_star %s tp_max %s congested %s; recomputed "
      "n_star %s (first report %s); served after --recompute %s"
      % (n, served["n_star"], served["tp_max"], served["congested_fraction"],
         recomputed["n_star"], true["n_star"], again["n_star"]))
keys = ("n_star", "n_star_fit", "tp_max", "congested_fraction")
ok = n >= 1 and [served[k] for k in keys] == [123.25, 77.5, 4321.5, 0.625] and \
    all(recomputed[k] == true[k] and again[k] == true[k] for k in keys) and \
    all(true[k] is not None for k in keys)
sys.exit(0 if ok else 1)
EOF

# ---- 4. throughput levels -------------------------------------------------------------
p="$work/speed"
sim "$lib/report_speed.conf" "$p"
"$TBNECK" report --tier mysql --db "$p.db" --format json >"$p.json"
read -r _ got want match lv <<<"$($truth levels "$p.json" "$p.speed.csv" 10.0.4.1:3306)"
echo "throughput levels: $got found ($lv work units/s), $want speeds configured: $match"
[ "$got" = 3 ] && [ "$want" = 3 ] && [ "$match" = match ] ||
    { echo "FAIL: expected 3 throughput levels in the ratios of the speeds"; failed=1; }

if [ "$failed" -ne 0 ]; then
    echo "FAIL"
    exit 1
fi
echo "PASS"
