# SPDX-License-Identifier: MIT
# report_truth.py — checks tbneck's analysis of a tbneck-sim capture against
# the simulator's truth files, independently of tbneck's code.
#
#   loads WINDOWS_CSV REQUESTS_CSV TIER [SERVER]
#       every window of `tbneck export windows` has the load computed here
#       from the truth requests (exact overlap / width), relative error < 1e-9;
#       the windows are aligned to multiples of their width, contiguous, and
#       span the truth requests; completions match the truth departures.
#   nstar REPORT_JSON EXPECTED_CSV TIER LABEL
#       prints "nstar LABEL n_star fit expected err_pct fit_err_pct disagree"
#   freezes REPORT_JSON FREEZES_CSV MIN_NS
#       prints "freezes TP FP FOUND TRUTH" for freeze-kind episodes of each
#       server against the truth freezes of that server lasting >= MIN_NS
#       (a detected episode is right when it overlaps a truth freeze of its
#       server; a truth freeze is found when a freeze episode overlaps it)
#   levels REPORT_JSON SPEED_CSV SERVER
#       prints "levels FOUND CONFIGURED match|differ LEVELS...": the throughput
#       levels of the report against the speed levels the server ran at (each
#       level / the top level within 0.05 of its speed / the top speed)
import csv
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def loads(win_csv, req_csv, tier, server=None):
    wins = list(csv.DictReader(open(win_csv)))
    if not wins:
        fail("%s: no windows" % win_csv)
    width = int(wins[0]["width_ns"])
    starts = [int(w["start_ns"]) for w in wins]
    want_server = server if server else "*"
    for i, w in enumerate(wins):
        if w["tier"] != tier or w["server"] != want_server:
            fail("window %d: tier/server %s/%s, expected %s/%s"
                 % (i, w["tier"], w["server"], tier, want_server))
        if int(w["width_ns"]) != width or starts[i] % width != 0:
            fail("window %d: start %d not aligned to width %d" % (i, starts[i], width))
        if i and starts[i] != starts[i - 1] + width:
            fail("windows %d and %d not contiguous" % (i - 1, i))
    reqs = [(int(r["arrival_ns"]), int(r["departure_ns"]))
            for r in csv.DictReader(open(req_csv))
            if r["tier"] == tier and (server is None or r["server"] == server)]
    if len(reqs) < 100:
        fail("only %d truth requests of %s %s" % (len(reqs), tier, server or ""))
    w0, n = starts[0], len(starts)
    first, last = min(a for a, d in reqs), max(d for a, d in reqs)
    if not (w0 <= first < w0 + width) or not (w0 + (n - 1) * width <= last < w0 + n * width):
        fail("windows [%d, %d) do not span the truth requests [%d, %d]"
             % (w0, w0 + n * width, first, last))
    busy = [0] * n
    comp = [0] * n
    for a, d in reqs:
        k = (a - w0) // width
        while k < n and w0 + k * width < d:
            lo, hi = w0 + k * width, w0 + (k + 1) * width
            busy[k] += min(d, hi) - max(a, lo)
            k += 1
        comp[(d - w0) // width] += 1
    worst = 0.0
    for i, w in enumerate(wins):
        exact = busy[i] / width
        got = float(w["load"])
        err = abs(got - exact) / exact if exact else abs(got)
        worst = max(worst, err)
        if err >= 1e-9:
            fail("%s %s window %d (start %d): tbneck load %.17g, truth %.17g"
                 % (tier, want_server, i, starts[i], got, exact))
        if int(w["completions"]) != comp[i]:
            fail("%s %s window %d: %s completions, truth %d"
                 % (tier, want_server, i, w["completions"], comp[i]))
    print("loads %s %s: %d windows of %d ns, %d requests, worst relative error %.3g"
          % (tier, want_server, n, width, len(reqs), worst))


def nstar(rep_json, exp_csv, tier, label):
    rep = json.load(open(rep_json))
    exp = [float(r["expected_n_star"]) for r in csv.DictReader(open(exp_csv))
           if r["tier"] == tier and r["server"] == "*"]
    if len(exp) != 1:
        fail("%s: no expected N* for tier %s" % (exp_csv, tier))
    e = exp[0]

    def pct(v):
        return "nan" if v is None else "%+.1f" % (100.0 * (v - e) / e)

    ns, fit = rep["n_star"], rep["n_star_fit"]
    print("nstar %s %s %s %g %s %s %s" % (label, "nan" if ns is None else "%.4f" % ns,
                                          "nan" if fit is None else "%.4f" % fit, e, pct(ns),
                                          pct(fit), "true" if rep["n_star_disagree"] else
                                          "false"))


def freezes(rep_json, fr_csv, min_ns):
    rep = json.load(open(rep_json))
    truth = list(csv.DictReader(open(fr_csv)))
    tp = fp = 0
    found = set()
    for s in rep["servers"]:
        mine = [t for t in truth if t["server"] == s["server"]]
        for e in s["episodes"]:
            if e["kind"] != "freeze":
                continue
            hit = [t for t in mine
                   if int(t["start_ns"]) < e["end_ns"] and e["start_ns"] < int(t["end_ns"])]
            if hit:
                tp += 1
            else:
                fp += 1
                print("  false freeze: %s %d..%d" % (s["server"], e["start_ns"], e["end_ns"]))
            for t in hit:
                found.add((t["server"], t["start_ns"]))
    big = [t for t in truth if int(t["end_ns"]) - int(t["start_ns"]) >= int(min_ns)]
    nfound = 0
    for t in big:
        if (t["server"], t["start_ns"]) in found:
            nfound += 1
        else:
            print("  missed freeze: %s %s..%s (%.0f ms)" % (
                t["server"], t["start_ns"], t["end_ns"],
                (int(t["end_ns"]) - int(t["start_ns"])) / 1e6))
    print("freezes %d %d %d %d" % (tp, fp, nfound, len(big)))


def levels(rep_json, speed_csv, server):
    rep = json.load(open(rep_json))
    speeds = sorted({float(r["speed"]) for r in csv.DictReader(open(speed_csv))
                     if r["server"] == server})
    lv = sorted(rep["levels"])
    # Each plateau is the top one times its speed: compare the ratios.
    ok = len(lv) == len(speeds) and all(
        abs(l / lv[-1] - sp / speeds[-1]) <= 0.05 for l, sp in zip(lv, speeds))
    print("levels %d %d %s %s" % (len(lv), len(speeds), "match" if ok else "differ",
                                  " ".join("%.1f" % l for l in lv)))


cmd = sys.argv[1]
if cmd == "loads":
    loads(*sys.argv[2:])
elif cmd == "nstar":
    nstar(*sys.argv[2:])
elif cmd == "freezes":
    freezes(*sys.argv[2:])
elif cmd == "levels":
    levels(*sys.argv[2:])
else:
    fail("unknown command " + cmd)
