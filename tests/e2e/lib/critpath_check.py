#!/usr/bin/env python3
# critpath_check.py — the critical path's per-tier shares of `diagnose
# --format json` (and `report --format json`) against the simulator's truth:
# each front request's tree from requests.csv's true parents; a tier's share
# of response time = the sum over its requests in the tree of their own time
# (duration minus their calls' durations) over the sum of response times —
# for all requests (mean) and for those at or above the 95th percentile. The
# tool's work + queue + pool of a tier must equal it within TOL (absolute,
# default 0.005), and the components must sum to 1 (within 0.002: calls linked
# to the wrong parent can overlap and overfill it).
# usage: critpath_check.py TRUTH.requests.csv DIAGNOSE.json [TOL]
import collections
import csv
import json
import math
import sys


def main():
    truth, out = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 0.005
    rows = list(csv.DictReader(open(truth, newline="")))
    by_id = {r["id"]: r for r in rows}
    dur = {r["id"]: int(r["departure_ns"]) - int(r["arrival_ns"]) for r in rows}
    kids = collections.defaultdict(int)
    for r in rows:
        if r["parent"]:
            kids[r["parent"]] += dur[r["id"]]

    def root(i):
        while by_id[i]["parent"]:
            i = by_id[i]["parent"]
        return i

    comp = collections.defaultdict(lambda: collections.defaultdict(float))
    for r in rows:
        comp[root(r["id"])][r["tier"]] += dur[r["id"]] - kids[r["id"]]
    fronts = sorted((dur[i], i) for i in comp)
    n = len(fronts)
    rank = max(1, min(n, math.ceil(0.95 * n)))

    def shares(sel):
        tot = sum(d for d, _ in sel)
        acc = collections.defaultdict(float)
        for _, i in sel:
            for t, v in comp[i].items():
                acc[t] += v
        return {t: v / tot for t, v in acc.items()}

    want = {"mean": shares(fronts), "p95": shares(fronts[rank - 1:])}
    d = json.load(open(out))
    cp = d["critical_path"]
    allc = cp["classes"][0]
    ok = allc["class"] == "*" and allc["requests"] == n
    for q in ("mean", "p95"):
        got = collections.defaultdict(float)
        for k, v in allc[q].items():
            got[k.rsplit(" ", 1)[0] if k != "wire" else "wire"] += v
        if abs(sum(allc[q].values()) - 1) > 0.002:
            print(f"{q}: components sum to {sum(allc[q].values())}")
            ok = False
        for t, v in want[q].items():
            mark = "ok" if abs(got[t] - v) <= tol else "FAIL"
            ok &= mark == "ok"
            print(f"{q:4s} {t:10s} truth {100 * v:6.2f}%  tbneck {100 * got[t]:6.2f}%  {mark}")
    print(f"front requests {n} (tbneck {allc['requests']}), linked {cp['linked']} of {cp['downstream']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
