#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# diag_check.py — scores one `tbneck diagnose --format json` against what the
# simulated run was built to show (the cause its configuration induces) and
# against the simulator's truth files, which tbneck never reads:
#   verdict: tier, server and cause of the configuration's cause;
#   none: verdict none and no episode;
#   freeze: every truth freeze >= 100 ms overlapped by an episode whose root is
#           the frozen server with cause freeze (share printed), none rooted at a
#           server that never froze;
#   pool: connections per caller server equal to the connections the tap
#         carried from that machine to the database (tshark's TCP streams, an
#         independent count), full_fraction reported, recommended > connections.
# usage: diag_check.py CAUSE DIAG.json TRUTH_PREFIX [TSHARK_STREAMS.csv]
# CAUSE: db-cpu app-cpu db-pool app-threads gc-one db-speed none, or the names of
# sim/examples/cause-*.conf (db-cpu app-cpu pool threads gc speed none).
# Prints one line "CAUSE ok|FAIL: ..." and the figures; exit 0 when right.
import csv, json, sys

cause, jpath, prefix = sys.argv[1:4]
streams = sys.argv[4] if len(sys.argv) > 4 else None
d = json.load(open(jpath))
v = d["verdict"]
# The expected verdict: the simulator's own (PREFIX.verdict.csv, written from
# the configuration's [expect]) when it wrote one, else what each of
# tests/e2e/lib/diag/*.conf is built to show.
want_server = None
try:
    row = list(csv.DictReader(open(prefix + ".verdict.csv")))[0]
    want = (row["tier"], row["cause"])
    want_server = row["server"] or "*"
except (OSError, IndexError, KeyError):
    want = {
        "db-cpu": ("mysql", "cpu"), "app-cpu": ("http-8080", "cpu"),
        "db-pool": ("http-8080", "pool"), "app-threads": ("http-8080", "threads"),
        "gc-one": ("http-8080", "freeze"), "db-speed": ("mysql", "speed"), "none": ("", "none"),
    }[cause]
cause = {"pool": "db-pool", "threads": "app-threads", "gc": "gc-one",
         "speed": "db-speed"}.get(cause, cause)
errs = []
if (v["tier"], v["cause"]) != want:
    errs.append(f"verdict {v['tier']}/{v['cause']}, want {want[0]}/{want[1]} ({v['evidence']})")
if want_server is not None and want[1] != "none" and v["server"] != want_server:
    errs.append(f"verdict server {v['server']}, want {want_server}")
if d["front_tier"] != "http":
    errs.append(f"front tier {d['front_tier']}")
for k in ("window_ns", "front_tier", "verdict", "tiers", "pools", "episodes"):
    if k not in d:
        errs.append(f"no {k} in the JSON")
for t in d["tiers"]:
    for k in ("tier", "state", "load_mean", "self_load_mean", "wait_load_mean", "stretch",
              "n_star_self"):
        if k not in t:
            errs.append(f"tier without {k}")
extra = ""
if cause == "none":
    if d["episodes"]:
        errs.append(f"{len(d['episodes'])} episodes in a run without a bottleneck")
if cause == "gc-one":
    frozen_servers = {r["server"] for r in csv.DictReader(open(prefix + ".freezes.csv"))}
    if [v["server"]] != sorted(frozen_servers):
        errs.append(f"verdict server {v['server']}, want the frozen {sorted(frozen_servers)}")
    fr = [r for r in csv.DictReader(open(prefix + ".freezes.csv"))
          if int(r["end_ns"]) - int(r["start_ns"]) >= 100_000_000]
    frozen = {r["server"] for r in csv.DictReader(open(prefix + ".freezes.csv"))}
    hit = 0
    for f in fr:
        s, e = int(f["start_ns"]), int(f["end_ns"])
        if any(ep["root_server"] == f["server"] and ep["cause"] == "freeze" and
               ep["start_ns"] < e and ep["end_ns"] > s for ep in d["episodes"]):
            hit += 1
    share = hit / len(fr) if fr else 0
    wrong = [ep for ep in d["episodes"] if ep["cause"] == "freeze" and
             ep["root_server"] not in frozen]
    extra = f" freezes>=100ms attributed {hit}/{len(fr)} ({100*share:.0f}%)"
    if not fr or share < 0.9:
        errs.append(f"only {hit}/{len(fr)} freezes >= 100 ms attributed to the frozen server")
    if wrong:
        errs.append(f"{len(wrong)} freeze episodes rooted at a server that never froze")
if cause == "db-pool":
    app = [p for p in d["pools"] if p["from_tier"] == "http-8080" and p["to_tier"] == "mysql"]
    if len(app) != 2:
        errs.append(f"{len(app)} pools http-8080 -> mysql, want one per app server (2)")
    want_conns = {}
    if streams:
        # Distinct TCP streams from each app machine to port 3306.
        seen = {}
        for row in csv.reader(open(streams)):
            if len(row) >= 5 and row[4] == "3306":
                seen.setdefault(row[1], set()).add(row[0])
        want_conns = {ip: len(s) for ip, s in seen.items()}
    for p in app:
        ip = p["from_server"].rsplit(":", 1)[0]
        if want_conns and p["connections"] != want_conns.get(ip):
            errs.append(f"{p['from_server']}: {p['connections']} connections, tshark "
                        f"{want_conns.get(ip)}")
        if not (p["recommended"] > p["connections"]):
            errs.append(f"{p['from_server']}: recommended {p['recommended']} not above "
                        f"{p['connections']}")
        if not (0 < p["full_fraction"] <= 1):
            errs.append(f"{p['from_server']}: full_fraction {p['full_fraction']}")
    extra = " " + " ".join(f"{p['from_server']}:conns={p['connections']},full="
                           f"{p['full_fraction']:.2f},rec={p['recommended']}" for p in app)
print(f"{cause} {'ok' if not errs else 'FAIL: ' + '; '.join(errs)} | verdict "
      f"{v['tier']} {v['server']} {v['cause']} share={v.get('share', 0):.2f} "
      f"episodes={len(d['episodes'])}{extra}")
sys.exit(1 if errs else 0)
