#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""jsonl_check.py WORK — the JSON lines of e2e_prometheus's captures.

Live (`capture -i --format jsonl`, WORK/live.jsonl): every line parses; window
lines of every tier and server carry the load of the window stored after the
capture (`tbneck export windows`), each ISO string names the same instant as
its *_ns; the tier windows' congested flags and the episodes equal the live
event stream's (WORK/sse.out, the same events through the dashboard).
Offline (`report --format jsonl` on WORK/off.db): per row an analysis line,
then windows equal to `export windows` (CSV) and episodes equal to
`report --format json`, in time order."""
import csv
import datetime
import io
import json
import os
import subprocess
import sys

FAILS = []


def check(cond, what):
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        FAILS.append(what)


def tb(*args):
    return subprocess.run([os.environ["TBNECK"]] + list(args), capture_output=True, text=True,
                          check=True).stdout


def iso_ok(d, name):
    s = d[name]
    t = datetime.datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S").replace(
        tzinfo=datetime.timezone.utc)
    ns = int(t.timestamp()) * 10**9 + int(s[20:29])
    return s.endswith("Z") and ns == d[name + "_ns"]


def stored(db, tier, server):
    args = ["export", "windows", "--tier", tier, "--db", db]
    if server != "*":
        args += ["--server", server]
    return {int(r["start_ns"]): r for r in csv.DictReader(io.StringIO(tb(*args)))}


def live(work):
    lines = [json.loads(l) for l in open(os.path.join(work, "live.jsonl"))]
    kinds = {}
    for d in lines:
        kinds[d["event"]] = kinds.get(d["event"], 0) + 1
    check(all(k in kinds for k in ("window", "analysis", "health")),
          "live JSON lines parse: %s" % kinds)
    check(all(iso_ok(d, "start") for d in lines if d["event"] in ("window", "episode")) and
          all(iso_ok(d, "time") for d in lines if d["event"] == "health"),
          "every ISO time equals its _ns")
    db = os.path.join(work, "live.db")
    rows = {}
    for d in lines:
        if d["event"] == "window":
            rows.setdefault((d["tier"], d["server"]), []).append(d)
    check(len(rows) >= 4, "window lines for %d tiers and servers" % len(rows))
    for (tier, srv), ws in sorted(rows.items()):
        st = stored(db, tier, srv)
        busy = bad = 0
        for d in ws:
            r = st.get(d["start_ns"])
            if r is None:
                bad += d["load"] != 0  # idle windows after the traffic are not stored
                continue
            busy += d["load"] > 0
            if abs(d["load"] - float(r["load"])) > 1e-9 * max(1, d["load"]) or \
               d["completions"] != int(r["completions"]):
                bad += 1
        check(bad == 0 and busy >= 20, "live %s %s: %d window lines (%d busy) = the stored "
              "windows' load and completions" % (tier, srv, len(ws), busy))
        if srv != "*":
            check(all(d["congested"] is None for d in ws), "live %s %s: congested null "
                  "(no per-server live rule)" % (tier, srv))
    # The same events through the dashboard's stream.
    sse = {"window": [], "episode": []}
    ev = None
    for l in open(os.path.join(work, "sse.out")):
        if l.startswith("event: "):
            ev = l[7:].strip()
        elif l.startswith("data: ") and ev in sse:
            sse[ev].append(json.loads(l[6:]))
    sw = {(d["tier"], d["start_ns"]): d["congested"] for d in sse["window"]}
    jw = {(d["tier"], d["start_ns"]): d["congested"] for d in lines
          if d["event"] == "window" and d["server"] == "*" and d["congested"] is not None}
    common = set(sw) & set(jw)
    check(len(common) >= 50 and all(sw[k] == jw[k] for k in common),
          "tier windows' congested flags = the live stream's (%d windows)" % len(common))
    key = lambda d: (d["tier"], d["start_ns"], d["end_ns"], d["kind"], d["ongoing"])
    je = sorted(key(d) for d in lines if d["event"] == "episode")
    se = sorted(key(d) for d in sse["episode"])
    check(je == se and len(je) > 0, "episode lines = the live stream's episodes (%d)" % len(je))
    # Which episodes the live rule flags (and as what kind) is e2e_live_veth's
    # question; on a loaded machine a replay's jitter varies it from run to run.


def offline(work):
    db = os.path.join(work, "off.db")
    tier = "http-8080"
    lines = [json.loads(l) for l in tb("report", "--tier", tier, "--db", db,
                                       "--format", "jsonl").splitlines()]
    rep = json.loads(tb("report", "--tier", tier, "--db", db, "--format", "json"))
    rows = []
    for d in lines:
        if d["event"] == "analysis":
            rows.append({"server": d["server"], "a": d, "w": [], "e": [], "order": []})
        else:
            if d["server"] != rows[-1]["server"]:
                check(False, "a %s line of %s follows the analysis line of %s"
                      % (d["event"], d["server"], rows[-1]["server"]))
            rows[-1]["w" if d["event"] == "window" else "e"].append(d)
            rows[-1]["order"].append(d["end_ns"] if d["event"] == "episode"
                                     else d["start_ns"] + d["width_ns"])
    servers = [r["server"] for r in rows]
    check(servers[0] == "*" and len(servers) == 3, "report jsonl rows: %s" % servers)
    for r in rows:
        st = stored(db, tier, r["server"])
        same = len(r["w"]) == len(st) and all(
            float(st[d["start_ns"]]["load"]) == d["load"] and
            float(st[d["start_ns"]]["norm_throughput"]) == d["norm_throughput"] for d in r["w"])
        check(same, "report jsonl %s: %d windows = export windows" % (r["server"], len(r["w"])))
        check(r["order"] == sorted(r["order"]), "report jsonl %s: in time order" % r["server"])
    want = [(e["start_ns"], e["end_ns"], e["kind"]) for e in rep["episodes"]]
    got = [(e["start_ns"], e["end_ns"], e["kind"]) for e in rows[0]["e"]]
    check(want == got, "report jsonl episodes = report --format json (%d)" % len(got))
    check(rows[0]["a"]["n_star"] == rep["n_star"], "analysis line's N* = report json's")
    srv_freeze = [sum(1 for e in r["e"] if e["kind"] == "freeze") for r in rows[1:]]
    nfreeze = sum(1 for _ in open(os.path.join(work, "gc.freezes.csv"))) - 1
    check(sum(srv_freeze) == nfreeze, "freeze episodes of the two servers %s = gc.conf's %d "
          "freezes" % (srv_freeze, nfreeze))


def main():
    work = sys.argv[1]
    live(work)
    offline(work)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
