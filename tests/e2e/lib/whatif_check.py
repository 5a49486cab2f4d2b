#!/usr/bin/env python3
# whatif_check.py — compares `tbneck whatif --format json` with the
# simulator's re-run of the same workload with the change made: the front
# tier's response times in the re-run's requests.csv (front requests: those
# with no parent; nearest-rank percentiles as tbneck's tb_quantile).
# usage: whatif_check.py WHATIF.json BASE.requests.csv RERUN.requests.csv LABEL
#        [MEAN_TOL P95_TOL]
# Prints one table row; exits 1 when the forecast mean is off by more than
# MEAN_TOL (default 0.15) or p95 by more than P95_TOL (0.25) of the re-run, or
# when the baseline is not the base run's truth (1e-9 relative).
import csv
import json
import math
import sys


def front(path):
    rows = [r for r in csv.DictReader(open(path, newline="")) if not r["parent"]]
    rt = sorted(int(r["departure_ns"]) - int(r["arrival_ns"]) for r in rows)
    n = len(rt)

    def q(p):
        return rt[max(1, min(n, math.ceil(p * n))) - 1]

    return {"rt_mean_ns": sum(rt) / n, "rt_p50_ns": q(0.5), "rt_p95_ns": q(0.95),
            "rt_p99_ns": q(0.99)}


def main():
    out, base, rerun, label = sys.argv[1:5]
    mt = float(sys.argv[5]) if len(sys.argv) > 5 else 0.15
    pt = float(sys.argv[6]) if len(sys.argv) > 6 else 0.25
    w = json.load(open(out))
    keys = {"tier", "change", "front_tier", "model", "baseline", "forecast"}
    if set(w) != keys:
        print(f"{label}: JSON keys {sorted(w)} != {sorted(keys)}")
        return 1
    b, t = front(base), front(rerun)
    ok = True
    for k in ("rt_mean_ns", "rt_p50_ns", "rt_p95_ns", "rt_p99_ns"):
        if abs(w["baseline"][k] - b[k]) > 1e-9 * max(1, b[k]):
            print(f"{label}: baseline {k} {w['baseline'][k]} != truth {b[k]}")
            ok = False
    f = w["forecast"]
    em = f["rt_mean_ns"] / t["rt_mean_ns"] - 1
    e95 = f["rt_p95_ns"] / t["rt_p95_ns"] - 1
    print(f"{label:28s} {w['model']:6s} base {b['rt_mean_ns']/1e6:7.2f}/{b['rt_p95_ns']/1e6:7.2f} ms"
          f"  rerun {t['rt_mean_ns']/1e6:7.2f}/{t['rt_p95_ns']/1e6:7.2f}"
          f"  forecast {f['rt_mean_ns']/1e6:7.2f}/{f['rt_p95_ns']/1e6:7.2f}"
          f"  err mean {100*em:+6.1f}% p95 {100*e95:+6.1f}%")
    if abs(em) > mt or abs(e95) > pt:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
