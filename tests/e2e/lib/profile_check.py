#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# profile_check.py — the oracle of `tbneck report --profile`: recomputes the
# per-class profile from `tbneck export requests` (requests of TIER, optionally
# one SERVER, whose departure lies in [FROM_NS, TO_NS)) and compares it with
# the report's JSON and CSV field by field, exactly.
#
#   profile_check.py REQUESTS.CSV TIER SERVER|'*' FROM_NS|- TO_NS|- PROFILE.json PROFILE.csv
#
# FROM_NS/TO_NS may also be start+S / end-S: seconds from the tier's first
# arrival or last departure (as the test's own reading of those words).
import csv
import json
import sys
from fractions import Fraction


def bound(spec, first, last, default):
    if spec == "-":
        return default
    for word, base in (("start", first), ("end", last)):
        if spec.startswith(word):
            off = spec[len(word):]
            sign = -1 if off.startswith("-") else 1
            return base + sign * int(Fraction(off[1:]) * 10**9)
    return int(spec)


def nearest_rank(sorted_rt, p):
    k = -(-len(sorted_rt) * p // 100)  # ceil(n * p / 100)
    return sorted_rt[max(k, 1) - 1]


def main():
    req, tier, server, lo_s, hi_s, js, cs = sys.argv[1:8]
    rows = [r for r in csv.DictReader(open(req, newline="")) if r["tier"] == tier]
    if server != "*":
        rows = [r for r in rows if r["server"] == server]
    first = min(int(r["arrival_ns"]) for r in rows)
    last = max(int(r["departure_ns"]) for r in rows)
    lo = bound(lo_s, first, last, -(2**63))
    hi = bound(hi_s, first, last, 2**63 - 1)
    by = {}
    for r in rows:
        d = int(r["departure_ns"])
        if lo <= d < hi:
            by.setdefault(r["class"], []).append(d - int(r["arrival_ns"]))
    total = sum(sum(v) for v in by.values())
    want = []
    for c, v in by.items():
        v.sort()
        want.append({"class": c, "count": len(v), "total_ns": sum(v),
                     "share": sum(v) / total if total else 0.0, "mean_ns": sum(v) / len(v),
                     "p50_ns": nearest_rank(v, 50), "p95_ns": nearest_rank(v, 95),
                     "p99_ns": nearest_rank(v, 99), "max_ns": v[-1]})
    want.sort(key=lambda x: -x["total_ns"])
    for i, w in enumerate(want):
        w["rank"] = i + 1
    got = json.load(open(js))
    bad = []
    p = got["profile"]
    if p["requests"] != sum(w["count"] for w in want) or p["total_ns"] != total:
        bad.append(f"totals: got {p['requests']} requests {p['total_ns']} ns, want "
                   f"{sum(w['count'] for w in want)} {total}")
    if len(p["classes"]) != len(want):
        bad.append(f"{len(p['classes'])} classes, want {len(want)}")
    for g, w in zip(p["classes"], want):
        for k, v in w.items():
            if g.get(k) != v:
                bad.append(f"rank {w['rank']} {w['class']!r}: {k} = {g.get(k)!r}, want {v!r}")
    crows = list(csv.DictReader(open(cs, newline="")))
    if len(crows) != len(want):
        bad.append(f"csv: {len(crows)} rows, want {len(want)}")
    for g, w in zip(crows, want):
        if g["tier"] != tier or g["server"] != server:
            bad.append(f"csv: tier/server {g['tier']}/{g['server']}")
        for k, v in w.items():
            gv = g[k] if k == "class" else (float(g[k]) if isinstance(v, float) else int(g[k]))
            if gv != v:
                bad.append(f"csv rank {w['rank']}: {k} = {g[k]!r}, want {v!r}")
    if bad:
        print("\n".join(bad[:20]))
        sys.exit(1)
    print(f"{tier} {server} [{lo_s}, {hi_s}): {len(want)} classes, "
          f"{sum(w['count'] for w in want)} requests, {total} ns, exact")


main()
