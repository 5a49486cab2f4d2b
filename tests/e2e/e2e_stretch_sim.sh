#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_stretch_sim.sh — the knee test's per-request stretch rule (v0.9) on
# tbneck-sim captures, against the simulator's truth:
#  1. a light stack whose 4-core database has heavy-tailed query times
#     (bench/nstar/light.conf, demand lognormal(1ms, 1.5); the false alarm of
#     issue 12): no congested window and no episode in any tier or server;
#     the database's reason is the stretch rule's, and the ratio it quotes
#     agrees (within 10%) with the one recomputed here from the truth
#     requests (median life of the requests arriving into that many others
#     in flight at their server over that of those arriving alone), which
#     must itself be under 1.3;
#  2. a congested 4-core database with exponential demands (db4.conf,
#     exp(1ms)): N* within 10% of expected.csv, the knee shown, its lives
#     quoted as stretched (x1.5 or more) and so in the truth.
#  3. held out (sweep.py's light16logn): the same heavy tails on a 16-core
#     database with 2400 users, light for its cores but seldom idle (the
#     truth, recomputed here: utilisation under 0.6, 5+ queries in flight on
#     average, under 1% of them arriving alone): no congested window and no
#     episode in any tier or server, the database's status no_congestion.
#  4. a saturated 8-core database (db8.conf, seed 111): few queries arrive
#     alone (213 in the truth, under 500), so the knee's lives are judged
#     against the busy-server baseline (v0.10, "vs 0-3"): the knee stands
#     within 10% of expected.csv and the ratio quoted agrees (within 10%)
#     with the truth's median life at 16+ over that at 0-3 in flight,
#     itself >= 1.5.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

source "$TB_SRCDIR/tests/e2e/lib/sim_capture.sh" # sim CONF PREFIX [options]

# truth_ratio REQUESTS_CSV TIER FROM [BASE_TO]: median life of the tier's
# requests that arrived into FROM or more others in flight at their server,
# over that of those that arrived alone (into at most BASE_TO others; a
# departure at the arrival instant has left).
cat >"$work/truth_ratio.py" <<'PY'
import csv, heapq, statistics, sys
path, tier, frm = sys.argv[1], sys.argv[2], int(sys.argv[3])
base_to = int(sys.argv[4]) if len(sys.argv) > 4 else 0
by = {}
for r in csv.DictReader(open(path)):
    if r["tier"] == tier:
        by.setdefault(r["server"], []).append((int(r["arrival_ns"]), int(r["departure_ns"])))
alone, crowded = [], []
for reqs in by.values():
    reqs.sort()
    heap = []
    for a, d in reqs:
        while heap and heap[0] <= a:
            heapq.heappop(heap)
        (alone if len(heap) <= base_to else crowded if len(heap) >= frm else []).append(d - a)
        heapq.heappush(heap, d)
print("%.4f %d %d" % (statistics.median(crowded) / statistics.median(alone), len(crowded),
                      len(alone)))
PY

# ---- 1. heavy tails, no contention ---------------------------------------------------
p="$work/lightlogn"
sim "$TB_SRCDIR/bench/nstar/light.conf" "$p" --seed 124 --duration 10s \
    --set "class.ViewStory.demand.db=lognormal(1ms,1.5)"
for tier in http http-8080 mysql; do
    "$TBNECK" report --tier "$tier" --db "$p.db" --format json >"$p.$tier.json"
done
python3 - "$p" "$work/truth_ratio.py" <<'PY' || failed=1
import json, re, subprocess, sys
p, oracle = sys.argv[1], sys.argv[2]
bad = []
for tier in ("http", "http-8080", "mysql"):
    r = json.load(open("%s.%s.json" % (p, tier)))
    for who in [r] + r["servers"]:
        name = tier + " " + who.get("server", "*")
        sat = [e for e in who["episodes"] if e["kind"] != "freeze"]
        if who["congested_fraction"] != 0 or sat or who["threshold"] is not None:
            bad.append("%s: %.1f%% congested, %d saturated episodes, threshold %s" % (
                name, 100 * who["congested_fraction"], len(sat), who["threshold"]))
db = json.load(open(p + ".mysql.json"))
why = db["n_star_reason"]
print("mysql: %s" % why)
m = re.match(r"no congestion: requests arriving into (\d+)\+ in flight live x([0-9.]+) ", why)
if db["n_star_status"] != "no_congestion" or not m:
    bad.append("mysql: not refused by the stretch rule: %s" % why)
else:
    frm, ratio = int(m.group(1)), float(m.group(2))
    out = subprocess.run([sys.executable, oracle, p + ".requests.csv", "mysql", str(frm)],
                         check=True, capture_output=True, text=True).stdout.split()
    truth = float(out[0])
    print("truth: requests arriving into %d+ in flight live x%.3f (%s and %s requests); "
          "tbneck x%.2f" % (frm, truth, out[1], out[2], ratio))
    if not truth < 1.3:
        bad.append("truth ratio %.3f: the scenario has contention after all" % truth)
    if abs(ratio - truth) > 0.1 * truth:
        bad.append("tbneck's ratio x%.2f is not within 10%% of the truth's x%.3f" % (ratio, truth))
print("heavy tails: " + ("; ".join(bad) if bad else "no congested window, no saturated episode"))
sys.exit(1 if bad else 0)
PY

# ---- 2. a real knee stands -------------------------------------------------------------
p="$work/db4exp"
sim "$TB_SRCDIR/bench/nstar/db4.conf" "$p" --seed 121 --duration 10s \
    --set "class.ViewStory.demand.db=exp(1ms)"
"$TBNECK" report --tier mysql --db "$p.db" --format json >"$p.json"
python3 - "$p" "$work/truth_ratio.py" <<'PY' || failed=1
import csv, json, re, subprocess, sys
p, oracle = sys.argv[1], sys.argv[2]
r = json.load(open(p + ".json"))
exp = [float(x["expected_n_star"]) for x in csv.DictReader(open(p + ".expected.csv"))
       if x["tier"] == "mysql" and x["server"] == "*"][0]
thr, why = r["threshold"], r["n_star_reason"]
print("db4exp: threshold %s for %.2f: %s" % (thr, exp, why))
m = re.search(r"; lives x([0-9.]+) \(ucb [0-9.]+, \d+\) at (\d+)\+ in flight", why)
ok = (thr is not None and abs(thr - exp) <= 0.1 * exp and r["n_star_status"] == "knee"
      and m is not None and float(m.group(1)) >= 1.5)
if m:
    truth = subprocess.run([sys.executable, oracle, p + ".requests.csv", "mysql", m.group(2)],
                           check=True, capture_output=True, text=True).stdout.split()
    print("truth: x%s at %s+ in flight" % (truth[0], m.group(2)))
    ok = ok and float(truth[0]) >= 1.5
sys.exit(0 if ok else 1)
PY

# ---- 3. heavy tails on a busy many-core server, no contention ------------------------
p="$work/light16logn"
sim "$TB_SRCDIR/bench/nstar/light.conf" "$p" --seed 121 --duration 10s --users 2400 \
    --set tier.db.cores=16 --set "class.ViewStory.demand.db=lognormal(1ms,1.5)"
for tier in http http-8080 mysql; do
    "$TBNECK" report --tier "$tier" --db "$p.db" --format json >"$p.$tier.json"
done
python3 - "$p" <<'PY' || failed=1
import csv, heapq, json, sys
p = sys.argv[1]
bad = []
for tier in ("http", "http-8080", "mysql"):
    r = json.load(open("%s.%s.json" % (p, tier)))
    for who in [r] + r["servers"]:
        name = tier + " " + who.get("server", "*")
        if who["congested_fraction"] != 0 or who["episodes"] or who["threshold"] is not None:
            bad.append("%s: %.1f%% congested, %d episodes, threshold %s" % (
                name, 100 * who["congested_fraction"], len(who["episodes"]), who["threshold"]))
db = json.load(open(p + ".mysql.json"))
print("mysql: %s: %s" % (db["n_star_status"], db["n_star_reason"]))
if db["n_star_status"] != "no_congestion":
    bad.append("mysql: status %s" % db["n_star_status"])
# The truth: one 16-core server; processor sharing, so min(n, 16) cores busy.
reqs = sorted((int(r["arrival_ns"]), int(r["departure_ns"]))
              for r in csv.DictReader(open(p + ".requests.csv")) if r["tier"] == "mysql")
ev = sorted([(a, 1) for a, _ in reqs] + [(d, -1) for _, d in reqs])
n = area = busy = 0
last = ev[0][0]
for t, k in ev:
    area += n * (t - last)
    busy += min(n, 16) * (t - last)
    last, n = t, n + k
span = last - ev[0][0]
heap, alone = [], 0
for a, d in reqs:
    while heap and heap[0] <= a:
        heapq.heappop(heap)
    alone += not heap
    heapq.heappush(heap, d)
util, inflight = busy / span / 16, area / span
print("truth: utilisation %.2f, %.2f in flight on average, %d of %d queries arrived alone" % (
    util, inflight, alone, len(reqs)))
if not (util < 0.6 and inflight >= 5 and alone < 0.01 * len(reqs)):
    bad.append("the scenario is not light-but-busy after all")
print("many cores: " + ("; ".join(bad) if bad else "no congested window, no episode"))
sys.exit(1 if bad else 0)
PY

# ---- 4. a busy server's baseline: a real knee judged without lone requests -------------
p="$work/db8"
sim "$TB_SRCDIR/bench/nstar/db8.conf" "$p" --seed 111 --duration 10s
"$TBNECK" report --tier mysql --db "$p.db" --format json >"$p.json"
python3 - "$p" "$work/truth_ratio.py" <<'PY' || failed=1
import csv, json, re, subprocess, sys
p, oracle = sys.argv[1], sys.argv[2]
r = json.load(open(p + ".json"))
exp = [float(x["expected_n_star"]) for x in csv.DictReader(open(p + ".expected.csv"))
       if x["tier"] == "mysql" and x["server"] == "*"][0]
thr, why = r["threshold"], r["n_star_reason"]
print("db8: threshold %s for %.2f: %s" % (thr, exp, why))
m = re.search(r"; lives x([0-9.]+) \(ucb [0-9.]+, \d+\) at (\d+)\+ in flight vs 0-(\d+)$", why)
ok = (thr is not None and abs(thr - exp) <= 0.1 * exp and r["n_star_status"] == "knee"
      and m is not None)
if m:
    ratio = float(m.group(1))
    t = subprocess.run([sys.executable, oracle, p + ".requests.csv", "mysql", m.group(2),
                        m.group(3)], check=True, capture_output=True, text=True).stdout.split()
    lone = subprocess.run([sys.executable, oracle, p + ".requests.csv", "mysql", m.group(2)],
                          check=True, capture_output=True, text=True).stdout.split()[2]
    print("truth: x%s at %s+ over 0-%s in flight (%s and %s requests; %s alone); tbneck x%.2f" % (
        t[0], m.group(2), m.group(3), t[1], t[2], lone, ratio))
    ok = ok and float(t[0]) >= 1.5 and abs(ratio - float(t[0])) <= 0.1 * float(t[0]) \
        and int(lone) < 500 and int(m.group(3)) == int(m.group(2)) // 4 - 1  # m < from/4
sys.exit(0 if ok else 1)
PY

[ "$failed" = 0 ] && echo "e2e_stretch_sim: OK"
exit "$failed"
