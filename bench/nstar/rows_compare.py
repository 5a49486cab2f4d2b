#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# rows_compare.py — every row (each tier and each server) of kept sweep
# databases reported by two builds, side by side: which knees one build
# shows and the other refuses, and the stretch rule's figures where it
# judged (docs/report.md "The per-request stretch rule (v0.9)").
#
#   bench/nstar/rows_compare.py BASE_TBNECK NEW_TBNECK DB...
#
# Each database is copied twice (the builds store analyses of different
# method versions) and reported with --recompute, base and new interleaved.
# Prints one line per row whose threshold differs, then a count per
# scenario (the database's name up to its last '_') of rows with a knee
# under each build and of knees the new build refuses. Exit 0.
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tiers(tb, db):
    out = subprocess.run([tb, "tiers", "--db", db], check=True, capture_output=True,
                         text=True).stdout
    return [line.split()[0] for line in out.splitlines()[1:] if line and not line.startswith(" ")]


def rows(tb, db, tier):
    r = json.loads(subprocess.run([tb, "report", "--tier", tier, "--db", db, "--format", "json",
                                   "--recompute"], check=True, capture_output=True,
                                  text=True).stdout)
    return {(tier, w.get("server", "*")): w for w in [r] + r["servers"]}


def main():
    base, new, dbs = sys.argv[1], sys.argv[2], sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix="st_rows.")
    per = {}
    ratios = []
    refused = []
    try:
        for db in dbs:
            scen = re.sub(r"_\d+\.db$", "", os.path.basename(db))
            a, b = os.path.join(tmp, "a.db"), os.path.join(tmp, "b.db")
            shutil.copy(db, a)
            shutil.copy(db, b)
            s = per.setdefault(scen, [0, 0, 0, 0])
            for t in tiers(new, b):
                ra, rb = rows(base, a, t), rows(new, b, t)
                for k in ra:
                    ta, tb_ = ra[k]["threshold"], rb[k]["threshold"]
                    s[0] += ta is not None
                    s[1] += tb_ is not None
                    s[2] += ta is not None and tb_ is None
                    s[3] += ta is None and tb_ is not None
                    m = re.search(r"lives x([0-9.]+) \(ucb ([0-9.]+), (\d+)\) at (\d+)\+",
                                  rb[k]["n_star_reason"])
                    if m:
                        ratios.append((float(m.group(1)), float(m.group(2)), scen, db, k))
                    m = re.match(r"no congestion: requests arriving into (\d+)\+ in flight live "
                                 r"x([0-9.]+) .*at most x([0-9.]+)", rb[k]["n_star_reason"])
                    if m:
                        refused.append((float(m.group(2)), float(m.group(3)), scen))
                    if ta != tb_:
                        print("%s %s %s: base %s (%s) / new %s (%s)" % (
                            os.path.basename(db), k[0], k[1], ta, ra[k]["n_star_reason"][:90],
                            tb_, rb[k]["n_star_reason"]))
    finally:
        shutil.rmtree(tmp)
    print("| scenario | rows with a knee, base | new | refused by new | new only |")
    print("|---|---|---|---|---|")
    for scen, (ka, kb, lost, gained) in sorted(per.items()):
        print("| %s | %d | %d | %d | %d |" % (scen, ka, kb, lost, gained))
    ratios.sort()
    print("| scenario | knees judged | lives ratio (min … max) | upper bound (min … max) |")
    print("|---|---|---|---|")
    for scen in sorted(per):
        rs = [r for r in ratios if r[2] == scen]
        if rs:
            print("| %s | %d | x%.2f … x%.2f | x%.2f … x%.2f |" % (
                scen, len(rs), min(r[0] for r in rs), max(r[0] for r in rs),
                min(r[1] for r in rs), max(r[1] for r in rs)))
    if refused:
        print("refused by the stretch rule: %d rows, ratio x%.2f … x%.2f, upper bound x%.2f … "
              "x%.2f" % (len(refused), min(r[0] for r in refused), max(r[0] for r in refused),
                         min(r[1] for r in refused), max(r[1] for r in refused)))
    print("knees kept with the rule judged, lowest lives ratios:")
    for r in ratios[:8]:
        print("  x%.2f (ucb %.2f) %s %s %s" % (r[0], r[1], r[2], os.path.basename(r[3]), r[4]))


if __name__ == "__main__":
    main()
