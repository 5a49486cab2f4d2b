#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""sim_causes.py — checks, from tbneck-sim's own truth, that a run produced the
cause its configuration states ([expect] -> PREFIX.verdict.csv).

Usage: sim_causes.py PREFIX [--min-app-load N]

Time per (server, label) is summed from PREFIX.causes.csv over the run (first
arrival to last departure in PREFIX.requests.csv).

With an expected cause C on servers V (one server, or every server of the tier
for `*`):
  - every server of V has C as its largest label, for 5% to 80% of the run (a
    transient bottleneck, neither absent nor permanent);
  - every other (server, label) pair holds less than a third of the smallest
    of those (the cause stands out);
  - labels other than C that the configuration leaves no room for are absent:
    no `pool` time unless C is pool, no `threads` unless C is threads, no
    `freeze` unless C is freeze, no `speed` unless C is speed.
With cause none: no server carries any label for more than 0.5% of the run.
Per cause also: freeze -> every freeze on V, 100-300 ms long; speed -> every
level of the server used, switches 0.6-6 s apart; pool -> connections.csv has
exactly the configured pool from each caller server to each callee server.
--min-app-load N: the app tier (http-8080) holds at least N requests on
average (for linking tests), and every request below the front tier names a
parent listed in the file.
Prints the figures; exits 1 on a failure.
"""
import collections
import csv
import re
import sys

fail = False


def need(cond, what):
    global fail
    if not cond:
        print("FAIL:", what)
        fail = True


def conf_values(path):
    """The effective configuration (PREFIX.truth.conf): {section: {key: value}}."""
    out, sec = {}, None
    for line in open(path):
        line = line.strip()
        m = re.match(r"\[(.*)\]$", line)
        if m:
            sec = m.group(1)
            out.setdefault(sec, {})
        elif "=" in line and sec:
            k, v = line.split("=", 1)
            out[sec][k.strip()] = v.strip()
    return out


def main():
    prefix = sys.argv[1]
    min_app_load = None
    if len(sys.argv) > 3 and sys.argv[2] == "--min-app-load":
        min_app_load = float(sys.argv[3])
    reqs = list(csv.DictReader(open(prefix + ".requests.csv")))
    t0 = min(int(r["arrival_ns"]) for r in reqs)
    t1 = max(int(r["departure_ns"]) for r in reqs)
    run = t1 - t0
    share = collections.Counter()
    tier_of = {}
    for r in csv.DictReader(open(prefix + ".causes.csv")):
        share[(r["server"], r["cause"])] += (int(r["end_ns"]) - int(r["start_ns"])) / run
        tier_of[r["server"]] = r["tier"]
    for r in reqs:
        tier_of[r["server"]] = r["tier"]
    for (s, c), v in sorted(share.items(), key=lambda x: -x[1])[:6]:
        print(f"  {s:20} {c:8} {100 * v:6.2f}% of the run")
    conf = conf_values(prefix + ".truth.conf")
    verdict = list(csv.DictReader(open(prefix + ".verdict.csv")))
    if verdict:
        v = verdict[0]
        cause = v["cause"]
        print(f"  expected: {v['tier'] or '-'} {v['server'] or '-'} {cause}")
        if cause == "none":
            for (s, c), x in share.items():
                need(x <= 0.005, f"{s} is {c} for {100 * x:.2f}% of a run with no bottleneck")
        else:
            servers = sorted(s for s, t in tier_of.items() if t == v["tier"]) \
                if v["server"] == "*" else [v["server"]]
            need(servers, f"no server of tier {v['tier']}")
            mine = [share[(s, cause)] for s in servers]
            for s, x in zip(servers, mine):
                top = max((y for (t, c), y in share.items() if t == s), default=0)
                need(0.05 <= x <= 0.8 and x == top,
                     f"{s}: {cause} {100 * x:.2f}% of the run, its largest label {100 * top:.2f}%")
            floor = min(mine) if mine else 0
            for (s, c), x in share.items():
                if (s in servers and c == cause):
                    continue
                need(x < floor / 3, f"{s} is {c} for {100 * x:.2f}%, against {cause} "
                                    f"{100 * floor:.2f}% on {','.join(servers)}")
                if c in ("pool", "threads", "freeze", "speed") and c != cause:
                    need(x == 0, f"{s} carries {c} ({100 * x:.3f}%) though only {cause} "
                                 f"should limit")
            if cause == "freeze":
                fz = list(csv.DictReader(open(prefix + ".freezes.csv")))
                need(fz, "no freeze")
                for f in fz:
                    n = int(f["end_ns"]) - int(f["start_ns"])
                    need(f["server"] in servers and 100e6 <= n <= 300e6,
                         f"freeze on {f['server']} of {n / 1e6:.1f} ms")
            if cause == "speed":
                for s in servers:
                    sp = [r for r in csv.DictReader(open(prefix + ".speed.csv"))
                          if r["server"] == s]
                    levels = {float(r["speed"]) for r in sp}
                    gaps = [(int(b["t_ns"]) - int(a["t_ns"])) / 1e9 for a, b in zip(sp, sp[1:])]
                    print(f"  {s}: speeds {sorted(levels)}, {len(gaps)} switches")
                    need(len(levels) >= 3, f"{s} used speeds {sorted(levels)}")
                    # The first switch counts from the users' start, a little
                    # after the run's first instant.
                    need(all(0.6 <= g <= 6.01 for g in gaps[1:]), f"{s}: switch gaps {gaps}")
            if cause == "pool":
                tiers = [k[5:] for k in conf if k.startswith("tier ")]
                caller = next(k for k in conf if k.startswith("tier ") and
                              conf[k].get("name") == v["tier"])
                pool = int(conf[caller]["pool"])
                callee = conf[f"tier {tiers[tiers.index(caller[5:]) + 1]}"]["name"]
                per = collections.Counter()
                for c in csv.DictReader(open(prefix + ".connections.csv")):
                    if c["client_tier"] == v["tier"] and c["server_tier"] == callee:
                        per[(c["client"].rsplit(":", 1)[0], c["server"])] += 1
                print(f"  pooled connections {v['tier']} -> {callee}: {dict(per)}")
                need(per and all(n == pool for n in per.values()),
                     f"connections per caller and callee server {dict(per)}, pool {pool}")
    if min_app_load is not None:
        app = [r for r in reqs if r["tier"] == "http-8080"]
        load = sum(int(r["departure_ns"]) - int(r["arrival_ns"]) for r in app) / run
        print(f"  http-8080 mean load {load:.1f} ({len(app)} requests)")
        need(load >= min_app_load, f"http-8080 mean load {load:.1f} < {min_app_load}")
        ids = {r["id"] for r in reqs}
        orphans = sum(1 for r in reqs if r["tier"] != "http" and r["parent"] not in ids)
        need(orphans == 0, f"{orphans} requests name no listed parent")
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
