#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_stack.sh — tbneck on a real nginx → Tomcat → MariaDB stack (scripts/stack/run.sh,
# tiers auto-discovered): the three tiers are found, every tier's request count matches
# what the servers counted themselves, Tomcat's long GC pauses (read here from its GC log)
# sit inside its exported congestion episodes and its freeze episodes are GC pauses,
# `tbneck events report` counts the same, diagnose derives the call graph and counts
# Tomcat's database connections as the webapp counted them, and the plots are drawn.
set -euo pipefail
: "${TBNECK:?set by meson}" "${TB_SRCDIR:?set by meson}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (namespaces, capture)"; exit 77; }

out=$(mktemp -d /tmp/e2e-stack.XXXXXX)
ok=0
finish() { if [ "$ok" = 1 ]; then rm -rf "$out"; else echo "e2e_stack: outputs kept in $out" >&2; fi; }
trap finish EXIT

bash "$TB_SRCDIR/scripts/stack/run.sh" --out "$out" --discover --duration "${TB_STACK_SECONDS:-40}" \
    --tbneck "$TBNECK"

"$TBNECK" tiers --db "$out/stack.db" >"$out/tiers-again.txt"
app_tier=$(awk '$1 == "app" { print $2 }' "$out/tier-names.txt")
"$TBNECK" export windows --tier "$app_tier" --window 50ms --db "$out/stack.db" >"$out/windows-app.csv"
python3 - "$out" <<'PY'
import calendar, csv, json, os, re, subprocess, sys
out = sys.argv[1]
failed = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failed.append(what)

names = dict(l.split() for l in open(os.path.join(out, "tier-names.txt")))
rows = [l.split() for l in open(os.path.join(out, "tier-counts.txt"))]
per_tier = {}
for tier, server, n in rows:
    per_tier[tier] = per_tier.get(tier, 0) + int(n)
counts = dict((k, int(v)) for k, v in (l.split() for l in open(os.path.join(out, "counts.txt"))))
tiers_out = open(os.path.join(out, "tiers-again.txt")).read()

# Discovery: one tier per server, named after the protocol (and port when not 80).
check(names == {"web": "http", "app": "http-8080", "db": "mysql"},
      f"discovered tiers http, http-8080, mysql: {names}")
check(len(per_tier) == 3, f"exactly three tiers carry requests: {sorted(per_tier)}")
for t in ("http", "http-8080", "mysql"):
    check(t in tiers_out.split(), f"'tbneck tiers' lists {t}")

def same(a, b, what):
    # The capture sees every request (no drop at this rate): equal, not "close".
    check(b > 1000 and a == b, f"{what}: tbneck {a} vs {b} (equal)")

check(counts["app_errors"] == 0, f"webapp errors: {counts['app_errors']}")
same(per_tier.get(names["web"], 0), counts["nginx_requests"], "web tier vs nginx access log")
same(per_tier.get(names["app"], 0), counts["nginx_requests"], "tomcat tier vs nginx access log")
same(per_tier.get(names["app"], 0), counts["tomcat_requests"], "tomcat tier vs webapp's own count")
same(per_tier.get(names["db"], 0), counts["mysql_questions"], "mysql tier vs MariaDB's Questions")
# The webapp counts only its own queries; MariaDB Connector/J adds set-up
# statements on each new connection (2 each with Debian 12's driver), which
# the wire and MariaDB's Questions carry.
extra = per_tier.get(names["db"], 0) - counts["jdbc_queries"]
check(0 <= extra <= 3 * counts["jdbc_connections"],
      f"mysql tier vs JDBC query count: tbneck {per_tier.get(names['db'], 0)} vs "
      f"{counts['jdbc_queries']} + set-up statements of {counts['jdbc_connections']} connections")

# The GC figures, computed here from Tomcat's own GC log and the episodes the
# report exported (not by `tbneck events report`, which is then held to them).
# A JDK 9+ unified log line "[2026-..T01:02:03.456+0000][12.3s][info][gc] GC(7)
# Pause Young (...) 30M->10M(48M) 12.345ms" is stamped when the pause ends.
app = names["app"]
rep = json.load(open(os.path.join(out, f"report-{app}.json")))
ev = json.load(open(os.path.join(out, "events-report.json")))
print("events report:", json.dumps(ev))
line_re = re.compile(r"^\[(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d+)([+-])(\d\d):?(\d\d)\]"
                     r"\[[^\]]*\]\[\s*\w+\s*\]\[\s*gc\s*\]\s*GC\(\d+\) Pause .* (\d+)\.(\d+)ms\s*$")
pauses = []
for line in open(os.path.join(out, "gc.log")):
    m = line_re.match(line)
    if not m:
        continue
    y, mo, d, h, mi, se = (int(x) for x in m.groups()[:6])
    frac, sign, oh, om, dms, dfrac = m.groups()[6:]
    end = (calendar.timegm((y, mo, d, h, mi, se)) - (1 if sign == "+" else -1)
           * (int(oh) * 3600 + int(om) * 60)) * 10**9 + int((frac + "000000000")[:9])
    dur = int(dms) * 10**6 + int((dfrac + "000000")[:6])
    pauses.append((end - dur, end))
lo, hi = rep["from_ns"], rep["to_ns"]
pauses = sorted(p for p in pauses if p[0] < hi and lo < p[1])
eps = [(e["start_ns"], e["end_ns"], e["kind"]) for e in rep["episodes"]]
def over(a, b):
    return a[0] < b[1] and b[0] < a[1]
long_ = [p for p in pauses if p[1] - p[0] >= 50 * 10**6]
in_ep = [p for p in pauses if any(over(p, e) for e in eps)]
long_in = [p for p in long_ if any(over(p, e) for e in eps)]
freeze = [e for e in eps if e[2] == "freeze"]
freeze_gc = [e for e in freeze if any(over(p, e) for p in pauses)]
ep_gc = [e for e in eps if any(over(p, e) for p in pauses)]
print(f"from the GC log: {len(pauses)} pauses in the capture, {len(long_)} of 50 ms or more, "
      f"{len(long_in)} of those inside one of {len(eps)} episodes; {len(freeze_gc)} of "
      f"{len(freeze)} freeze episodes overlap a pause")
check(len(long_) >= 5, f"at least 5 GC pauses of 50 ms or more in the run: {len(long_)}")
# A stop-the-world pause of 50 ms with 16 connections in flight always piles
# requests up in Tomcat: every one must lie in an episode (21/21 and 14/14 measured).
check(long_ and len(long_in) == len(long_),
      f"GC pauses >= 50 ms inside a Tomcat congestion episode: {len(long_in)}/{len(long_)}")
check(len(freeze) >= 3, f"Tomcat has freeze episodes: {len(freeze)}")
# Tolerance: a JVM also stops for what its [gc] log does not record (safepoints
# for deoptimisation or biased locking, class loading) and the kernel may stall
# it, so a freeze need not be a logged pause (15 of 15 and 14 of 15 in two runs).
check(freeze and len(freeze_gc) >= 0.8 * len(freeze),
      f"Tomcat freeze episodes overlapping a GC pause: {len(freeze_gc)}/{len(freeze)} >= 80%")
# The pauses without a knee (issue 12): Tomcat waits on MariaDB for ~99% of
# each request, so the line at load 1 promises ~5 completions a window and
# its pauses were found only when the knee test accepted Tomcat's knee.
# Forced off here without any knob: each long pause is reported over 1.5 s
# around it (300 ms before its start to 1.2 s after; 30 windows, fewer than
# the knee test's 33, so N* is undetermined and nothing is congested), with
# the whole run's service times (--service-times, the report's classes: a
# work unit measured over a range that is mostly the pause would hold the
# pause). Every such pause must still lie in a freeze episode (the stall
# rule's own-work promise), and every freeze episode there on a logged pause.
with open(os.path.join(out, "svc-times.txt"), "w") as f:
    for c in rep["classes"]:
        f.write("%s\t%dus\n" % (c["class"], round(c["service_ns"] / 1000)))
nk_found = nk_fz = nk_fz_gc = nk_knee = 0
for p in long_:
    a, b = p[0] - 300 * 10**6, p[0] + 1200 * 10**6
    r = json.loads(subprocess.run(
        [os.environ["TBNECK"], "report", "--tier", app, "--db", os.path.join(out, "stack.db"),
         "--format", "json", "--from", str(a), "--to", str(b),
         "--service-times", os.path.join(out, "svc-times.txt")],
        capture_output=True, text=True, check=True).stdout)
    nk_knee += r["n_star_status"] == "knee" or r["threshold"] is not None
    fz = [(e["start_ns"], e["end_ns"]) for e in r["episodes"] if e["kind"] == "freeze"]
    nk_found += any(over(p, e) for e in fz)
    nk_fz += len(fz)
    nk_fz_gc += sum(any(over(q, e) for q in pauses) for e in fz)
print(f"no knee: {nk_found} of {len(long_)} long pauses in a freeze episode of their 1.5 s; "
      f"{nk_fz_gc} of {nk_fz} freeze episodes there on a logged pause")
check(nk_knee == 0, f"no knee in the 1.5 s around each long pause: {nk_knee} had a threshold")
check(long_ and nk_found == len(long_),
      f"GC pauses >= 50 ms in a freeze episode with N* undetermined: {nk_found}/{len(long_)}")
# The tolerance of the whole run's check below (a JVM also stops for what its
# GC log does not record); 23/23 measured.
check(nk_fz and nk_fz_gc >= 0.8 * nk_fz,
      f"freeze episodes with N* undetermined on a GC pause: {nk_fz_gc}/{nk_fz} >= 80%")
# `tbneck events report` must give the same counts as computed here.
for key, mine in (("pauses", len(pauses)), ("long_pauses", len(long_)),
                  ("pauses_in_episodes", len(in_ep)), ("long_pauses_in_episodes", len(long_in)),
                  ("episodes", len(eps)), ("freeze_episodes", len(freeze)),
                  ("freeze_with_pause", len(freeze_gc)), ("episodes_with_pause", len(ep_gc))):
    check(ev[key] == mine, f"events report {key} = {ev[key]}, from the GC log {mine}")

# GC running ratio per window (the union of pauses over each 50 ms window) against
# the tier's exported load per window: the paper's Figure 10a correlation.
width = rep["window_ns"]
load = {}
for row in csv.DictReader(open(os.path.join(out, "windows-app.csv"))):
    load[int(row["start_ns"])] = float(row["load"])
xs, ys = [], []
for s in range(lo, hi, width):
    cov, upto = 0, s
    for a, b in pauses:
        a, b = max(a, upto), min(b, s + width)
        if b > a:
            cov += b - a
            upto = b
    xs.append(cov / width)
    ys.append(load.get(s, 0.0))
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
c = sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else None
# Tolerance: how strongly GC and load go together depends on the JVM's heap
# and the machine (0.90 measured here); the paper's Figure 10a claims a clear
# positive correlation, not a value.
check(c is not None and c >= 0.5,
      f"GC running ratio and Tomcat load correlate per window (paper's Figure 10a): r = {c}")
check(c is not None and ev["correlation"] is not None and abs(ev["correlation"] - c) < 1e-6,
      f"events report correlation {ev['correlation']} = {c} computed here")

# diagnose: the call graph derived from the wire (nginx -> Tomcat -> MariaDB),
# Tomcat's connections to MariaDB counted as the webapp counted its JDBC
# connections, a verdict from the fixed vocabulary.
dg = json.load(open(os.path.join(out, "diagnose.json")))
depth = {t["tier"]: t["depth"] for t in dg["tiers"]}
check(dg["front_tier"] == names["web"], f"diagnose: front tier {dg['front_tier']}")
check(depth == {names["web"]: 0, names["app"]: 1, names["db"]: 2},
      f"diagnose: call graph web -> app -> db by depth {depth}")
pools = [p for p in dg["pools"] if p["from_tier"] == names["app"] and p["to_tier"] == names["db"]]
seen = sum(p["connections_seen"] for p in pools)
check(len(pools) == 1 and seen == counts["jdbc_connections"],
      f"diagnose: {names['app']} -> {names['db']} connections seen {seen}, the webapp opened "
      f"{counts['jdbc_connections']}")
check(all(p["connections"] <= p["connections_seen"] for p in pools), "diagnose: open at once <= seen")
check(dg["verdict"]["cause"] in ("cpu", "freeze", "speed", "pool", "threads", "none"),
      f"diagnose verdict: {dg['verdict']['cause']}: {dg['verdict']['evidence']}")
for p in ["diagnose.png", "diagnose-graph.png"]:
    path = os.path.join(out, p)
    check(os.path.exists(path) and open(path, "rb").read(4) == b"\x89PNG", f"plot {p} drawn")
for p in ["gc-load.png", "gc-load-12s.png"] + [f"report-{t}.png" for t in per_tier]:
    path = os.path.join(out, p)
    good = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n" \
        and os.path.getsize(path) > 2000
    check(good, f"plot {p} drawn")
sys.exit(1 if failed else 0)
PY
ok=1
