#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""prom_check.py — e2e_prometheus's checks, over Prometheus' HTTP API.

  during: the live capture's packet counter reaches tcpreplay's count, no drops.
  after:  job "serve" against tbneck's API, `tbneck export windows` and the
          simulator's requests.csv; job "live" (every scraped sample) against
          the windows stored after the capture and the live event stream;
          every query of the Grafana dashboard answers.

Values come back from Prometheus as Go's shortest float text, which Python
reads as the same double; tbneck writes every float so that it reads back
exactly, so equality is exact where both sides are the same double."""
import argparse
import csv
import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

FAILS = []


def check(cond, what):
    if cond:
        print("ok: " + what)
    else:
        print("FAIL: " + what)
        FAILS.append(what)


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def prom(base, query):
    """Instant query: the result list (vector or matrix)."""
    d = get_json(base + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
    if d.get("status") != "success":
        raise RuntimeError("query %r: %s" % (query, d))
    return d["data"]["result"]


def one(base, query):
    r = prom(base, query)
    if len(r) != 1:
        return None
    return float(r[0]["value"][1])


def sel(job, tier, server):
    esc = lambda s: s.replace("\\", "\\\\").replace('"', '\\"')
    return '{job="%s",tier="%s",server="%s"}' % (job, esc(tier), esc(server))


def during(a):
    deadline = time.time() + 20
    pk = None
    while time.time() < deadline:
        pk = one(a.prom, 'tbneck_packets_total{job="live"}')
        if pk is not None and int(pk) == a.sent:
            break
        time.sleep(0.5)
    check(pk is not None and int(pk) == a.sent,
          "live tbneck_packets_total %s = packets tcpreplay sent %d" % (pk, a.sent))
    for kind in ("kernel", "interface"):
        d = one(a.prom, 'tbneck_drops_total{job="live",kind="%s"}' % kind)
        check(d == 0, "live tbneck_drops_total{kind=%s} = 0 (%s)" % (kind, d))


def read_windows(path):
    with open(path, newline="") as f:
        return [dict(r, start_ns=int(r["start_ns"]), width_ns=int(r["width_ns"]),
                     load=float(r["load"])) for r in csv.DictReader(f)]


def export_windows(db, tier, server, out):
    cmd = [os.environ["TBNECK"], "export", "windows", "--tier", tier, "--db", db]
    if server != "*":
        cmd += ["--server", server]
    with open(out, "w") as f:
        subprocess.run(cmd, stdout=f, check=True)
    return read_windows(out)


def tiers_of(base):
    return [(t["name"], ["*"] + t["servers"]) for t in get_json(base + "/api/tiers")["tiers"]
            if t["requests"] > 0]


def check_serve(a):
    truth = {}
    with open(a.truth, newline="") as f:
        for r in csv.DictReader(f):
            truth[r["server"]] = truth.get(r["server"], 0) + 1
    rows = 0
    for tier, servers in tiers_of(a.serve):
        for srv in servers:
            q = "tier=%s&width=50ms" % urllib.parse.quote(tier)
            if srv != "*":
                q += "&server=" + urllib.parse.quote(srv)
            w = get_json(a.serve + "/api/windows?" + q)
            sc = get_json(a.serve + "/api/scatter?" + q)
            an = get_json(a.serve + "/api/analysis?" + q)
            ep = get_json(a.serve + "/api/episodes?" + q)["episodes"]
            ex = export_windows(os.path.join(a.work, "off.db"), tier, srv,
                                os.path.join(a.work, "exp-off.csv"))
            s = sel("serve", tier, srv)
            name = "serve %s %s" % (tier, srv)
            load = one(a.prom, "tbneck_load" + s)
            check(load is not None and load == w["load"][-1] == ex[-1]["load"],
                  "%s: tbneck_load %r = /api/windows' latest %r = export's latest %r" %
                  (name, load, w["load"][-1], ex[-1]["load"]))
            start = one(a.prom, "tbneck_window_start_seconds" + s)
            check(start is not None and abs(start - w["start_ns"][-1] / 1e9) < 1e-6 and
                  w["start_ns"][-1] == ex[-1]["start_ns"],
                  "%s: window start %r s = the API's %d ns" % (name, start, w["start_ns"][-1]))
            for m, col in (("tbneck_throughput", "throughput"),
                           ("tbneck_norm_throughput", "norm_throughput")):
                v = one(a.prom, m + s)
                check(v == w[col][-1], "%s: %s %r = API %r" % (name, m, v, w[col][-1]))
            rt = one(a.prom, "tbneck_response_time_seconds" + s)
            want = w["rt_mean_ns"][-1] / 1e9
            check(rt is not None and abs(rt - want) <= 1e-12 * max(1.0, want),
                  "%s: response time %r s = API %r" % (name, rt, want))
            n = one(a.prom, "tbneck_requests_total" + s)
            if srv == "*":
                want_n = sum(truth.get(x, 0) for x in servers[1:])
            else:
                want_n = truth.get(srv, 0)
            check(n == want_n, "%s: tbneck_requests_total %r = simulator's requests %d" %
                  (name, n, want_n))
            for kind in ("freeze", "saturated"):
                v = one(a.prom, 'tbneck_episodes_total{job="serve",tier="%s",server="%s",kind="%s"}'
                        % (tier, srv, kind))
                want_k = sum(1 for e in ep if e["kind"] == kind)
                check(v == want_k, "%s: %s episodes %r = /api/episodes %d" % (name, kind, v, want_k))
            ns = one(a.prom, "tbneck_n_star" + s)
            check(ns == an["n_star"], "%s: tbneck_n_star %r = /api/analysis %r" %
                  (name, ns, an["n_star"]))
            cong = one(a.prom, "tbneck_congested" + s)
            check(cong == sc["congested"][-1], "%s: tbneck_congested %r = /api/scatter's latest %r"
                  % (name, cong, sc["congested"][-1]))
            cs = one(a.prom, "tbneck_congested_seconds_total" + s)
            want_cs = sum(sc["congested"]) * 0.05
            check(cs is not None and abs(cs - want_cs) < 1e-9,
                  "%s: congested seconds %r = %d congested windows x 50 ms" %
                  (name, cs, sum(sc["congested"])))
            rows += 1
    check(rows >= 7, "serve: %d tier/server rows compared" % rows)


def series(base, query):
    """Range query: {(tier, server): {ts: value}}."""
    out = {}
    for r in prom(base, query):
        k = (r["metric"]["tier"], r["metric"]["server"])
        out[k] = {float(t): float(v) for t, v in r["values"]}
    return out


def check_live(a):
    loads = series(a.prom, 'tbneck_load{job="live"}[10m]')
    starts = series(a.prom, 'tbneck_window_start_seconds{job="live"}[10m]')
    congs = series(a.prom, 'tbneck_congested{job="live"}[10m]')
    sse = {}
    with open(os.path.join(a.work, "sse.out")) as f:
        ev = None
        for line in f:
            if line.startswith("event: "):
                ev = line[7:].strip()
            elif line.startswith("data: ") and ev == "window":
                d = json.loads(line[6:])
                sse[(d["tier"], d["start_ns"])] = d["congested"]
    db = os.path.join(a.work, "live.db")
    check(len(loads) >= 4, "live: %d load series (tiers and servers)" % len(loads))
    for (tier, srv), ls in sorted(loads.items()):
        name = "live %s %s" % (tier, srv)
        ex = export_windows(db, tier, srv, os.path.join(a.work, "exp-live.csv"))
        by_start = {w["start_ns"]: w for w in ex}
        width = ex[0]["width_ns"]
        st = starts.get((tier, srv), {})
        paired = busy = bad = outside = 0
        for ts, v in ls.items():
            if ts not in st:
                continue
            s_ns = round(st[ts] * 1e9 / width) * width
            paired += 1
            w = by_start.get(s_ns)
            if w is None:
                # Windows close on the clock after the traffic too (idle).
                outside += 1
                if v != 0 and (s_ns < ex[0]["start_ns"] or s_ns > ex[-1]["start_ns"]):
                    bad += 1
                    print("  %s: window %d outside the stored ones has load %r" % (name, s_ns, v))
                continue
            if v > 0:
                busy += 1
            if abs(v - w["load"]) > 1e-9 * max(1.0, w["load"]):
                bad += 1
                print("  %s: window %d scraped load %r, stored %r" % (name, s_ns, v, w["load"]))
        check(bad == 0 and busy >= 5,
              "%s: %d scraped loads (%d busy, %d idle after the traffic) = the stored windows"
              % (name, paired, busy, outside))
        if srv == "*":
            cs = congs.get((tier, srv), {})
            n = mism = 0
            for ts, v in cs.items():
                s_ns = round(st[ts] * 1e9 / width) * width
                if (tier, s_ns) in sse:
                    n += 1
                    mism += (v == 1) != sse[(tier, s_ns)]
            check(n >= 5 and mism == 0,
                  "%s: congested flag of %d scraped windows = the live stream's" % (name, n))
    tiers_out = subprocess.run([os.environ["TBNECK"], "tiers", "--db", db], capture_output=True,
                               text=True, check=True).stdout.splitlines()[1:]
    for line in tiers_out:
        if line.startswith(" "):
            continue
        f = line.split()
        # The capture has ended: its series are stale, their last sample stays.
        n = one(a.prom, 'last_over_time(tbneck_requests_total{job="live",tier="%s",server="*"}[10m])'
                % f[0])
        check(n == int(f[-1]), "live %s: tbneck_requests_total %r = requests stored %s"
              % (f[0], n, f[-1]))


def check_grafana(a):
    with open(a.grafana) as f:
        dash = json.load(f)
    tier = "http-8080"
    n = 0
    for p in dash["panels"]:
        for t in p.get("targets", []):
            q = (t["expr"].replace("$job", "serve|live").replace("$tier", tier)
                 .replace("$server", ".*").replace("$__rate_interval", "1m"))
            r = prom(a.prom, q)
            check(len(r) > 0, "grafana panel %r: %s answers (%d series)" % (p["title"], q, len(r)))
            n += 1
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            metric = v["definition"].split("(")[1].split("{")[0].split(",")[0]
            check(len(prom(a.prom, metric)) > 0, "grafana variable %s: %s exists" %
                  (v["name"], metric))
    check(n >= 8, "grafana: %d panel queries" % n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["during", "after"])
    ap.add_argument("--prom", required=True)
    ap.add_argument("--serve")
    ap.add_argument("--sent", type=int)
    ap.add_argument("--work")
    ap.add_argument("--truth")
    ap.add_argument("--grafana")
    a = ap.parse_args()
    if a.mode == "during":
        during(a)
    else:
        check_serve(a)
        check_live(a)
        check_grafana(a)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
