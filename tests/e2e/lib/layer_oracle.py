#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# layer_oracle.py — the layered load of `tbneck diagnose --format csv` against
# an independent computation from the simulator's truth (requests.csv, which
# tbneck never reads), per tier and window:
#   load  = (1/w) ∫ N(t) dt                 (N: the tier's requests in flight)
#   wait  = (1/w) ∫ min(C(t), N(t)) dt per server, summed over the tier
#           (C: requests of other tiers whose client is that server's machine)
# and Little's law along the call path: the front tier's load equals the sum
# of every tier's self-load (load - wait) in every window, the simulator's
# calls being nested in their parents one at a time.
# usage: layer_oracle.py TRUTH_REQUESTS.csv DIAGNOSE.csv
import csv, sys
from collections import defaultdict

truth, diag = sys.argv[1:3]
rows = list(csv.DictReader(open(diag)))
width = int(rows[0]["width_ns"])
t0 = min(int(r["start_ns"]) for r in rows)
nwin = len({r["start_ns"] for r in rows})
req = [(r["tier"], r["server"], r["client"].rsplit(":", 1)[0], int(r["arrival_ns"]),
        int(r["departure_ns"])) for r in csv.DictReader(open(truth))]
server_ip = {}
for t, s, c, a, d in req:
    server_ip[s.rsplit(":", 1)[0]] = s

# Per server: +1/-1 events of its own requests (N) and of its calls (C).
ev = defaultdict(list)
for t, s, c, a, d in req:
    ev[s].append((a, 1, 0))
    ev[s].append((d, -1, 0))
    caller = server_ip.get(c)
    if caller and caller != s:
        ev[caller].append((a, 0, 1))
        ev[caller].append((d, 0, -1))
tier_of = {s: t for t, s, c, a, d in req}
load = defaultdict(lambda: [0] * nwin)
wait = defaultdict(lambda: [0] * nwin)

def add(arr, a, b, v):
    # integer request-ns, clipped to the windows
    a, b = max(a, t0), min(b, t0 + nwin * width)
    while a < b and v:
        k = (a - t0) // width
        e = min(b, t0 + (k + 1) * width)
        arr[k] += (e - a) * v
        a = e

for s, evs in ev.items():
    evs.sort()
    n = c = 0
    last = None
    for t, dn, dc in evs:
        if last is not None and t > last:
            add(load[tier_of[s]], last, t, n)
            add(wait[tier_of[s]], last, t, min(n, c))
        n += dn
        c += dc
        last = t

bad = 0
worst = 0.0
front = None
got = defaultdict(dict)
for r in rows:
    k = (int(r["start_ns"]) - t0) // width
    got[r["tier"]][k] = (float(r["self_load"]), float(r["wait_load"]))
for tier, per in got.items():
    for k, (sf, wt) in per.items():
        ld, wo = load[tier][k] / width, wait[tier][k] / width
        for name, g, w in (("load", sf + wt, ld), ("wait", wt, wo)):
            err = abs(g - w)
            worst = max(worst, err / max(1.0, abs(w)))
            if err > 1e-9 * max(1.0, abs(w)):
                bad += 1
                if bad <= 5:
                    print(f"FAIL: {tier} window {k} {name}: tbneck {g}, truth {w}")
# The front tier: the one no tier's server calls (users do).
callees = {t for t, s, c, a, d in req if server_ip.get(c)}
fronts = set(got) - callees
front = fronts.pop() if len(fronts) == 1 else None
if front is None:
    print("FAIL: no single front tier in", sorted(got))
    sys.exit(1)
little = 0
for k in range(nwin):
    fl = sum(got[front][k])
    selfsum = sum(got[t][k][0] for t in got)
    if abs(fl - selfsum) > 1e-9 * max(1.0, fl):
        little += 1
        if little <= 5:
            print(f"FAIL: window {k}: front load {fl}, sum of self-loads {selfsum}")
busy = sum(1 for k in range(nwin) if sum(got[front][k]) > 1)
print(f"layers: {len(got)} tiers x {nwin} windows, worst relative error {worst:.2e}, "
      f"Little's law broken in {little} windows ({busy} windows with front load > 1)")
sys.exit(1 if bad or little or busy == 0 else 0)
