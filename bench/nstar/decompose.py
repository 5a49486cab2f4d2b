#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# decompose.py — splits the N* error of a tier that waits on its calls into
# the error of the linear part's slope and the error of the plateau, against
# the simulator's configuration (not tbneck), for runs kept by
# `bench/nstar/sweep.py --keep` (bench/nstar/appcpu.conf, app.conf).
#
#   bench/nstar/decompose.py [--build DIR] [--tier http-8080] RUNS_DIR|PREFIX.db ...
#
# N* = level / slope, so (1 + err) = (1 + level_err) / (1 + slope_err):
#   level  the plateau read by the report, threshold x slope, against the
#          tier's capacity c/D (truth.conf: servers x cores / mean demand),
#          in work units (x the class's units per request);
#   slope  the report's slope against capacity / expected N* (expected.csv:
#          1/R per unit of load, R the life without queueing);
#   S      the class's service time (the isolated-request estimate the slope
#          hint uses), and z = (S - D) / (D / sqrt(samples)): for an
#          exponential demand, the standard error of a mean over `samples`
#          isolated requests is D / sqrt(samples), so z of standard deviation
#          about 1 says that S's error is the sampling noise of that mean.
# Prints one line per run and a summary: the runs within 10%, and those that
# would be with the true slope (|level error| <= 10%). One class only; exit
# status 0, 1 when a run cannot be read, 2 on a usage error.
import argparse
import configparser
import csv
import glob
import json
import math
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def mean_of(dist):
    m = re.fullmatch(r"(exp|const)\((\d+(?:\.\d+)?)(ns|us|ms|s)\)", dist.strip())
    if not m:
        raise ValueError("demand '%s': only exp(X) and const(X) are understood" % dist)
    return m.group(1), float(m.group(2)) * UNIT[m.group(3)]


def truth(prefix, tier):
    cp = configparser.ConfigParser(interpolation=None)
    if not cp.read(prefix + ".truth.conf"):
        raise ValueError("%s.truth.conf: cannot be read (a run kept by sweep.py --keep?)" % prefix)
    sec = [s for s in cp.sections() if s.startswith("tier ") and cp[s].get("name") == tier]
    cls = [s for s in cp.sections() if s.startswith("class ")]
    if len(sec) != 1 or len(cls) != 1:
        raise ValueError("%s.truth.conf: want one tier named %s and one class" % (prefix, tier))
    short = sec[0].split()[1]
    kind, d = mean_of(cp[cls[0]]["demand." + short])
    cores = int(cp[sec[0]]["servers"]) * int(cp[sec[0]]["cores"])
    want = [float(r["expected_n_star"]) for r in csv.DictReader(open(prefix + ".expected.csv"))
            if r["tier"] == tier and r["server"] == "*"][0]
    return kind, d, cores / d, want


def one(tb, db, tier):
    prefix = db[:-3]
    kind, d, cap, want = truth(prefix, tier)
    out = subprocess.run([tb, "report", "--tier", tier, "--db", db, "--format", "json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode:
        raise RuntimeError(out.stderr.strip())
    r = json.loads(out.stdout)
    cl = r["classes"][0]
    units = cl["units"]
    thr, slope = r["threshold"], r["slope"]
    true_slope = cap * units / want
    pct = lambda a, b: None if a is None else 100.0 * (a / b - 1)
    s = cl["service_ns"] * 1e-9
    z = (s - d) / (d / math.sqrt(cl["samples"])) if kind == "exp" and cl["samples"] else None
    return {"run": os.path.basename(prefix), "err": pct(thr, want),
            "slope_err": pct(slope, true_slope),
            "level_err": None if thr is None else pct(thr * slope, cap * units),
            "S_ms": s * 1e3, "samples": cl["samples"], "z": z,
            "hinted": "slope hint" in (r.get("n_star_reason") or ""),
            "status": r.get("n_star_status")}


def main():
    ap = argparse.ArgumentParser(description="N* error = slope error x plateau error")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--tier", default="http-8080")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    tb = os.path.join(a.build, "tbneck")
    if not os.access(tb, os.X_OK):
        print("decompose.py: %s: not built" % tb, file=sys.stderr)
        return 2
    dbs = []
    for x in a.runs:
        dbs += sorted(glob.glob(os.path.join(x, "*.db"))) if os.path.isdir(x) else [x]
    if not dbs:
        print("decompose.py: no PREFIX.db given or found", file=sys.stderr)
        return 2
    rows, bad = [], 0
    f = lambda v: "-" if v is None else "%+.1f" % v
    for db in dbs:
        try:
            x = one(tb, db, a.tier)
        except (OSError, ValueError, RuntimeError, KeyError, IndexError) as e:
            print("%s: %s" % (db, e), file=sys.stderr)
            bad = 1
            continue
        rows.append(x)
        print("%-14s N* %6s%%  slope %6s%%  level %6s%%  S %.3f ms (%3d samples, z %s)  %s%s" % (
            x["run"], f(x["err"]), f(x["slope_err"]), f(x["level_err"]), x["S_ms"],
            x["samples"], f(x["z"]), x["status"], ", hinted" if x["hinted"] else ""))
    if rows:
        ok = sum(1 for x in rows if x["err"] is not None and abs(x["err"]) <= 10)
        flat = sum(1 for x in rows if x["level_err"] is not None and abs(x["level_err"]) <= 10)
        zs = [x["z"] for x in rows if x["z"] is not None]
        print("%d runs: %d within 10%%; with the true slope %d (|level error| <= 10%%)" % (
            len(rows), ok, flat))
        if len(zs) > 1:
            print("service time z: mean %+.2f, standard deviation %.2f" % (
                statistics.mean(zs), statistics.stdev(zs)))
    return bad


if __name__ == "__main__":
    sys.exit(main())
