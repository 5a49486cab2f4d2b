#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# sweep.py — N*, congestion and speed levels over many seeds, against ground
# truth that does not come from tbneck: the simulator's expected.csv (N* =
# cores, or cores x R/D for a tier that calls downstream) and speed.csv, or
# the independent generator's own truth (bench/nstar/mmc_pcap.py).
#
#   bench/nstar/sweep.py [--build DIR] [--seeds 101-120] [--only a,b] [--out DIR]
#                        [--window 50ms] [--duration 40s] [--keep]
#   bench/nstar/sweep.py --summary OUT1/results.tsv [OUT2/results.tsv ...]
#
# Each run: generate a capture, `tbneck capture -r`, `tbneck report --format
# json`, and check one of:
#   nstar   the report's threshold (n_star, else n_star_fit) within 10% of
#           the expected N* of the tier;
#   light   no tier and no server has a congested window or an episode;
#   levels  the database server shows as many throughput levels as speeds it
#           ran at while congested, each level / the top one within 10% of
#           its speed / the top speed, and >= 90% of the windows of each
#           level's time intervals ran at that level's speed.
# Prints one line per run and a table per scenario (runs, passes, rate,
# errors, median wall and CPU seconds per run: the generator, capture and
# reports, children included); writes both to OUT/results.tsv and
# OUT/summary.md. --summary runs nothing: it prints the table of one or more
# results.tsv (e.g. a sweep split into several invocations; a scenario and
# seed seen twice counts once, the last). Exit status 0
# when every scenario passes in >= 95% of its runs (light: every run), 1
# otherwise, 2 on a usage error. Run it by hand, with nice: 20 seeds of all
# 17 scenarios took about 90 minutes on a shared 2-core machine (tables in
# docs/report.md, "The N* sweep"); at v0.10, 11 scenarios x 20 seeds at
# --duration 40s took 21 minutes (docs/report.md, "The acceptance on seeds
# 131-150 at 40 s").
import argparse
import bisect
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (generator, config [--set overrides] or generator arguments, check, tier)
SCENARIOS = {
    "db1": ("sim", "db1.conf", "nstar", "mysql"),
    "db2": ("sim", "db2.conf", "nstar", "mysql"),
    "db4": ("sim", "db4.conf", "nstar", "mysql"),
    "db8": ("sim", "db8.conf", "nstar", "mysql"),
    "app": ("sim", "app.conf", "nstar", "http-8080"),
    "appcpu": ("sim", "appcpu.conf", "nstar", "http-8080"),
    "bursty": ("sim", "bursty.conf", "nstar", "mysql"),
    "steady": ("sim", "steady.conf", "nstar", "mysql"),
    "ramp": ("sim", "ramp.conf", "nstar", "mysql"),
    "light": ("sim", "light.conf", "light", None),
    "dvfs": ("sim", "dvfs.conf", "levels", "mysql"),
    # Held-out shapes (round 12f): the db scenarios above with variable
    # database demands instead of const(1ms), never tuned on.
    "db1exp": ("sim", "db1.conf --set class.ViewStory.demand.db=exp(1ms)", "nstar", "mysql"),
    "db2exp": ("sim", "db2.conf --set class.ViewStory.demand.db=exp(1ms)", "nstar", "mysql"),
    "db4exp": ("sim", "db4.conf --set class.ViewStory.demand.db=exp(1ms)", "nstar", "mysql"),
    "db8exp": ("sim", "db8.conf --set class.ViewStory.demand.db=exp(1ms)", "nstar", "mysql"),
    "db2logn": ("sim", "db2.conf --set class.ViewStory.demand.db=lognormal(1ms,1.0)", "nstar",
                "mysql"),
    "db8logn": ("sim", "db8.conf --set class.ViewStory.demand.db=lognormal(1ms,1.0)", "nstar",
                "mysql"),
    "light2x": ("sim", "light.conf --users 600", "light", None),
    "lightlogn": ("sim", "light.conf --set class.ViewStory.demand.db=lognormal(1ms,1.5)", "light",
                  None),
    "lightlogn1": ("sim", "light.conf --set class.ViewStory.demand.db=lognormal(1ms,1.0)", "light",
                   None),
    # Held out (issue 12, stretch2): light for its cores but seldom idle, with
    # heavy tails: the database at 8 / 16 cores, users raised so it holds
    # about 3.7 / 7.3 in flight on average at a utilisation of about 0.46
    # (simulator truth, seed 121); few of its queries arrive alone.
    "light8logn": ("sim", "light.conf --users 1200 --set tier.db.cores=8 "
                   "--set class.ViewStory.demand.db=lognormal(1ms,1.5)", "light", None),
    "light16logn": ("sim", "light.conf --users 2400 --set tier.db.cores=16 "
                    "--set class.ViewStory.demand.db=lognormal(1ms,1.5)", "light", None),
    # The independent generator (mmc_pcap.py): first come first served on c
    # workers, exponential work of 1 ms, users thinking 1 s, bursts of 1 s
    # every 4 s at 3x the rate (steady: none, 95% busy).
    "py1": ("py", "--cores 1 --users 400 --think 1000 --service 1 --burst 1000,3000,0.33",
            "nstar", "http-8080"),
    "py2": ("py", "--cores 2 --users 800 --think 1000 --service 1 --burst 1000,3000,0.33",
            "nstar", "http-8080"),
    "py4": ("py", "--cores 4 --users 1600 --think 1000 --service 1 --burst 1000,3000,0.33",
            "nstar", "http-8080"),
    "py8": ("py", "--cores 8 --users 3200 --think 1000 --service 1 --burst 1000,3000,0.33",
            "nstar", "http-8080"),
    "pysteady": ("py", "--cores 2 --users 1900 --think 1000 --service 1", "nstar", "http-8080"),
    "pylight": ("py", "--cores 4 --users 1200 --think 1000 --service 1", "light", None),
    "pydvfs": ("py", "--cores 2 --users 1000 --think 1000 --service 1 --const "
               "--burst 1000,3000,0.33 --speeds 0.45,0.7,1.0 --switch 600,6000",
               "levels", "http-8080"),
}


def run(cmd, **kw):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return p.stdout


def report(tb, db, tier, window):
    return json.loads(run([tb, "report", "--tier", tier, "--db", db, "--window", window,
                           "--format", "json"]))


def tiers(tb, db):
    out = run([tb, "tiers", "--db", db])
    names = []
    for line in out.splitlines()[1:]:
        f = line.split()
        if f and not line.startswith(" "):
            names.append(f[0])
    return names


def generate(gen, arg, prefix, seed, duration_s=None):
    if gen == "sim":
        conf, *extra = arg.split()
        run([SIM, os.path.join(HERE, conf)] + extra + ["--out", prefix, "--seed", str(seed), "-q"] +
            (["--duration", "%gs" % duration_s] if duration_s else []))
    else:
        run([sys.executable, os.path.join(HERE, "mmc_pcap.py")] + arg.split() +
            ["--out", prefix, "--seed", str(seed)] +
            (["--duration", "%g" % duration_s] if duration_s else []))


def expected_nstar(prefix, tier):
    for r in csv.DictReader(open(prefix + ".expected.csv")):
        if r["tier"] == tier and r["server"] == "*":
            return float(r["expected_n_star"])
    raise RuntimeError("%s.expected.csv: no expected N* for tier %s" % (prefix, tier))


def check_nstar(rep, prefix, tier):
    e = expected_nstar(prefix, tier)
    thr = rep["threshold"]
    err = None if thr is None else 100.0 * (thr - e) / e
    ok = err is not None and abs(err) <= 10.0

    def pct(v):
        return "-" if v is None else "%+.1f" % (100.0 * (v - e) / e)

    detail = "expected %.2f threshold %s (%s%%) n_star %s fit %s; %s" % (
        e, "-" if thr is None else "%.3f" % thr, pct(thr), pct(rep["n_star"]),
        pct(rep["n_star_fit"]), rep.get("n_star_reason", ""))
    return ok, err, detail


def check_light(tb, db, window):
    bad = []
    for t in tiers(tb, db):
        rep = report(tb, db, t, window)
        for who in [rep] + rep["servers"]:
            name = t if who is rep else t + " " + who["server"]
            if who["congested_fraction"] or who["episodes"]:
                bad.append("%s: %.1f%% congested, %d episodes (N* %s, fit %s)" % (
                    name, 100 * who["congested_fraction"], len(who["episodes"]),
                    who["n_star"], who["n_star_fit"]))
    return not bad, None, "; ".join(bad) if bad else "no congested window anywhere"


def check_levels(rep, prefix):
    srv = rep["servers"][0]
    changes = sorted((int(r["t_ns"]), float(r["speed"]))
                     for r in csv.DictReader(open(prefix + ".speed.csv"))
                     if r["server"] == srv["server"])
    speeds = sorted({sp for _, sp in changes})
    unseen = []
    if os.path.exists(prefix + ".deep.csv"):
        # The independent generator says when the server ran at capacity
        # (>= 2C inside). A speed that never held through such a stretch of
        # 4 windows or more, 8 windows in all, has no plateau to find: it
        # is not asked for (pydvfs seed 3: 0.7 only in the run's last 0.5 s).
        deep = [(int(r["start_ns"]), int(r["end_ns"]))
                for r in csv.DictReader(open(prefix + ".deep.csv")) if r["server"] == srv["server"]]
        ends = [t for t, _ in changes[1:]] + [max([e for _, e in deep] + [changes[-1][0]]) + 1]
        held = {sp: 0 for sp in speeds}
        for (t0, sp), t1 in zip(changes, ends):
            for a, b in deep:
                x, y = max(a, t0), min(b, t1)
                if y - x >= 200_000_000:
                    held[sp] += y - x
        unseen = [sp for sp in speeds if held[sp] < 400_000_000]
        speeds = [sp for sp in speeds if sp not in unseen]
    lv = sorted(x for x in srv["levels"] if x is not None)
    ok = len(lv) == len(speeds) and all(
        abs((l / lv[-1]) / (s / speeds[-1]) - 1) <= 0.10 for l, s in zip(lv, speeds))
    worst = None
    if len(lv) == len(speeds):
        worst = max(100.0 * abs((l / lv[-1]) / (s / speeds[-1]) - 1) for l, s in zip(lv, speeds))
    # The intervals: each window of a level's spans ran at that level's speed
    # (by rank), per the truth's speed changes; a window straddling a change
    # counts by the speed at its middle.
    right = total = 0
    times = [t for t, _ in changes]
    for sp in srv.get("level_spans", []):
        t = sp["start_ns"]
        width = (sp["end_ns"] - sp["start_ns"]) // max(sp["windows"], 1)
        while t < sp["end_ns"]:
            mid = t + width // 2
            k = bisect.bisect_right(times, mid) - 1
            speed = changes[max(k, 0)][1]
            total += 1
            right += (len(lv) == len(speeds) and speed in speeds
                      and speeds.index(speed) == sp["level"])
            t += width
    share = right / total if total else 0.0
    ok = ok and share >= 0.9
    return ok, worst, "%d levels (%s) for speeds %s%s; %d of %d span windows at their level's speed" % (
        len(lv), " ".join("%.0f" % x for x in lv), " ".join("%g" % s for s in speeds),
        " (never at capacity: %s)" % " ".join("%g" % s for s in unseen) if unseen else "", right, total)


def one(name, seed, work, window, duration_s=None):
    gen, arg, kind, tier = SCENARIOS[name]
    prefix = os.path.join(work, "%s_%d" % (name, seed))
    db = prefix + ".db"
    generate(gen, arg, prefix, seed, duration_s)
    run([TBNECK, "capture", "-r", prefix + ".pcap", "--db", db, "-q"])
    os.unlink(prefix + ".pcap")
    if kind == "light":
        return check_light(TBNECK, db, window)
    rep = report(TBNECK, db, tier, window)
    if kind == "nstar":
        return check_nstar(rep, prefix, tier)
    return check_levels(rep, prefix)


def seeds_of(spec):
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def summarize(names, rows):
    """rows: (scenario, seed, ok, error or None, wall s or None, cpu s or None)."""
    good = True
    lines = ["| scenario | check | runs | pass | rate | errors % (min … max) | wall s / CPU s per run |",
             "|---|---|---|---|---|---|---|"]
    for n in names:
        rs = [r for r in rows if r[0] == n]
        npass = sum(1 for r in rs if r[2])
        errs = [r[3] for r in rs if r[3] is not None]
        rate = npass / len(rs) if rs else 0
        need = 1.0 if SCENARIOS[n][2] == "light" else 0.95
        good &= rate >= need
        wall = median([r[4] for r in rs if r[4] is not None])
        cpu = median([r[5] for r in rs if r[5] is not None])
        lines.append("| %s | %s | %d | %d | %.0f%% | %s | %s |" % (
            n, SCENARIOS[n][2], len(rs), npass, 100 * rate,
            "%+.1f … %+.1f" % (min(errs), max(errs)) if errs else "-",
            "%.0f / %.0f" % (wall, cpu) if wall is not None and cpu is not None else "-"))
    return good, "\n".join(lines)


def summary_of(paths):
    got = {}
    for p in paths:
        with open(p) as f:
            head = f.readline().rstrip("\n").split("\t")
            for line in f:
                r = dict(zip(head, line.rstrip("\n").split("\t")))
                if r.get("scenario") not in SCENARIOS:
                    raise ValueError("%s: unknown scenario '%s'" % (p, r.get("scenario")))

                def num(k):
                    v = r.get(k, "-")
                    return None if v in ("-", "") else float(v)
                got[(r["scenario"], int(r["seed"]))] = (
                    r["scenario"], int(r["seed"]), r["pass"] == "pass", num("error_pct"),
                    num("wall_s"), num("cpu_s"))
    rows = list(got.values())
    names = [n for n in SCENARIOS if any(r[0] == n for r in rows)]
    return names, rows


def main():
    global TBNECK, SIM
    ap = argparse.ArgumentParser(description="N* / congestion / levels sweep over seeds")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--seeds", default="101-120")
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--window", default="50ms")
    ap.add_argument("--keep", action="store_true", help="keep the databases and truth files")
    ap.add_argument("--duration", default=None,
                    help="every capture this long, e.g. 40s (default: each scenario's own, 10 s)")
    ap.add_argument("--summary", nargs="+", metavar="TSV",
                    help="print the table of these results.tsv files and run nothing")
    a = ap.parse_args()
    if a.summary:
        try:
            names, rows = summary_of(a.summary)
        except (OSError, ValueError, KeyError) as e:
            print("sweep.py: --summary: %s" % e, file=sys.stderr)
            return 2
        good, table = summarize(names, rows)
        print(table)
        return 0 if good else 1
    duration_s = None
    if a.duration is not None:
        try:
            duration_s = float(a.duration[:-1] if a.duration.endswith("s") else a.duration)
        except ValueError:
            duration_s = -1
        if not duration_s > 0:
            print("sweep.py: bad --duration '%s' (seconds, e.g. 40s)" % a.duration, file=sys.stderr)
            return 2
    TBNECK = os.path.join(a.build, "tbneck")
    SIM = os.path.join(a.build, "sim", "tbneck-sim")
    names = a.only.split(",")
    for n in names:
        if n not in SCENARIOS:
            print("sweep.py: unknown scenario '%s' (known: %s)" % (n, ", ".join(SCENARIOS)),
                  file=sys.stderr)
            return 2
    for p in (TBNECK, SIM):
        if not os.access(p, os.X_OK):
            print("sweep.py: %s: not built" % p, file=sys.stderr)
            return 2
    seeds = seeds_of(a.seeds)
    out = a.out or tempfile.mkdtemp(prefix="nstar-sweep.")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="runs.", dir=out)
    # The binaries are copied first, so that a rebuild while the sweep runs
    # cannot mix two versions in one table.
    bindir = tempfile.mkdtemp(prefix="bin.", dir=out)
    TBNECK = shutil.copy2(TBNECK, bindir)
    SIM = shutil.copy2(SIM, bindir)
    rows = []
    with open(os.path.join(out, "results.tsv"), "w") as f:
        f.write("scenario\tseed\tpass\terror_pct\twall_s\tcpu_s\tdetail\n")
        for n in names:
            for s in seeds:
                w0, c0 = time.monotonic(), os.times()
                try:
                    ok, err, detail = one(n, s, work, a.window, duration_s)
                except Exception as e:  # one broken run is a failed run, not a stop
                    ok, err, detail = False, None, "error: %s" % e
                c1 = os.times()
                wall = time.monotonic() - w0
                cpu = sum(getattr(c1, k) - getattr(c0, k)
                          for k in ("user", "system", "children_user", "children_system"))
                rows.append((n, s, ok, err, wall, cpu))
                line = "%s\t%d\t%s\t%s\t%.1f\t%.1f\t%s" % (
                    n, s, "pass" if ok else "FAIL", "-" if err is None else "%+.1f" % err,
                    wall, cpu, detail)
                print(line, flush=True)
                f.write(line + "\n")
                if not a.keep:
                    for x in os.listdir(work):
                        os.unlink(os.path.join(work, x))
    shutil.rmtree(bindir)
    if not a.keep:
        shutil.rmtree(work)
    good, table = summarize(names, rows)
    print("\nseeds %s, window %s\n%s" % (a.seeds, a.window, table))
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("seeds %s, window %s\n\n%s\n" % (a.seeds, a.window, table))
    print("results in %s" % out)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
