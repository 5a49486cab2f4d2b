#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_stack_causes.sh — `tbneck diagnose` on the real nginx → Tomcat → MariaDB stack
# (scripts/stack/run.sh, tiers discovered) with each induced cause in turn, asserting
# the verdict's tier, server and cause against what was done to the stack, and each
# against a witness that does not come from tbneck:
#   gc     Tomcat's stop-the-world pauses: verdict http-8080 <Tomcat> freeze; the GC log
#          shows pauses of 50 ms or more
#   pool   the webapp's JDBC pool capped at 2: verdict http-8080 <Tomcat> pool; the pool
#          entry counts the webapp's own 2 connections, recommends more than 2, and the
#          evidence sentence quotes the verdict's share, which is at least 50%
#   dbcpu  MariaDB held to a CFS quota of 30 ms per 100 ms: verdict mysql <MariaDB> cpu,
#          its quota period within 2% of the cgroup's cpu.max period
#   threads  Tomcat's connector capped at 2 threads (a JDBC pool of 10 kept open, 64 users
#          thinking 350 ms): verdict http-8080 <Tomcat> threads; the witnesses: the
#          webapp's own count of requests running at once peaked at exactly the
#          connector's maxThreads in the generated server.xml (2), nginx's own clock
#          (timing.log) saw at least twice that many requests at Tomcat at once (they
#          queued, none failed: webapp errors 0, nginx's count == the webapp's), and
#          Tomcat's CPU from /proc stayed under half a core (not what limits it)
#   none   nothing wrong, a light load (8 users thinking 150 ms): verdict cause none;
#          `tbneck report` of every tier: no freeze episode (unless wrk's slowest request
#          and, for Tomcat, nginx's own timing log show the stall) and at most 1% of its
#          windows congested (measured 0 in every run, docs/stack.md); the witness
#          that the load is light: each tier's CPU from /proc under 0.25 of a core
#          and no request failed in the webapp
# About 45-70 s per cause (216 s in all at load average ~5, more when busier). TB_STACK_CAUSES
# (default "gc pool dbcpu threads none"), TB_STACK_CAUSE_SECONDS (20). The stack runs on its own
# bridge and net (STACK_BRIDGE tbcbr0, STACK_NET 10.78.0) so that it never meets
# e2e_stack's, and at the largest CPU weight (STACK_PRIORITY=1, docs/stack.md) so
# that a busy machine starves none of its tiers into a second bottleneck.
set -euo pipefail
: "${TBNECK:?set by meson}" "${TB_SRCDIR:?set by meson}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (namespaces, capture, cgroups)"; exit 77; }
export STACK_BRIDGE=${STACK_BRIDGE:-tbcbr0} STACK_NET=${STACK_NET:-10.78.0} STACK_PRIORITY=${STACK_PRIORITY:-1}

out=$(mktemp -d /tmp/e2e-stack-causes.XXXXXX)
ok=0
finish() { if [ "$ok" = 1 ]; then rm -rf "$out"; else echo "e2e_stack_causes: outputs kept in $out" >&2; fi; }
trap finish EXIT

bash "$TB_SRCDIR/scripts/deps.sh" --stack >"$out/deps.log" 2>&1 \
    || { tail -20 "$out/deps.log" >&2; echo "e2e_stack_causes: scripts/deps.sh --stack failed" >&2; exit 1; }
failed=0
for cause in ${TB_STACK_CAUSES:-gc pool dbcpu threads none}; do
    start=$SECONDS
    bash "$TB_SRCDIR/scripts/stack/run.sh" --out "$out/$cause" --discover --cause "$cause" \
        --duration "${TB_STACK_CAUSE_SECONDS:-20}" --tbneck "$TBNECK" --no-deps --quick \
        >"$out/$cause.log" 2>&1 || { tail -30 "$out/$cause.log" >&2; echo "FAIL run.sh --cause $cause" >&2; failed=1; continue; }
    echo "== $cause: run.sh took $((SECONDS - start)) s"
    if [ "$cause" = none ]; then
        # The report's congestion and episodes per tier (run.sh --quick draws none).
        while read -r _ tier; do
            "$TBNECK" report --tier "$tier" --window 50ms --db "$out/none/stack.db" --format json \
                >"$out/none/report-$tier.json" || { echo "FAIL tbneck report --tier $tier" >&2; failed=1; }
        done <"$out/none/tier-names.txt"
    fi
    python3 - "$out" "$cause" <<'PY' || failed=1
import json, os, re, sys
out, cause = sys.argv[1], sys.argv[2]
d = os.path.join(out, cause)
failed = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + f"{cause}: {what}")
    if not cond:
        failed.append(what)

def cpu_shares():
    # Each tier's CPU from /proc over the load, in cores (run.sh's cpu.txt).
    cpu = {}
    for l in open(os.path.join(d, "cpu.txt")):
        m = re.match(r"cpu_(\w+) [\d.]+ s, ([\d.]+) of one core", l)
        if m:
            cpu[m.group(1)] = float(m.group(2))
    return cpu

diag = json.load(open(os.path.join(d, "diagnose.json")))
v = diag["verdict"]
names = dict(l.split() for l in open(os.path.join(d, "tier-names.txt")))
servers = {}
for tier, server, n in (l.split() for l in open(os.path.join(d, "tier-counts.txt"))):
    servers[tier] = server
counts = dict((k, int(x)) for k, x in (l.split() for l in open(os.path.join(d, "counts.txt"))))
app, db = names["app"], names["db"]
print(f"   verdict: {v['tier']} {v['server']} {v['cause']} share {v['share']}: {v['evidence']}")
check(diag["front_tier"] == names["web"], f"front tier {diag['front_tier']} is nginx's {names['web']}")

if cause == "gc":
    check((v["tier"], v["server"], v["cause"]) == (app, servers[app], "freeze"),
          f"verdict {v['tier']} {v['server']} {v['cause']} == {app} {servers[app]} freeze")
    # The witness: Tomcat's own GC log ([gc] lines end with the pause in ms).
    pauses = [float(m.group(1)) for m in
              re.finditer(r"\[gc\s*\].*?(\d+\.\d+)ms\s*$", open(os.path.join(d, "gc.log")).read(), re.M)]
    long_ = [p for p in pauses if p >= 50]
    check(len(long_) >= 3, f"the GC log has {len(long_)} pauses of 50 ms or more (>= 3)")
elif cause == "pool":
    check((v["tier"], v["server"], v["cause"]) == (app, servers[app], "pool"),
          f"verdict {v['tier']} {v['server']} {v['cause']} == {app} {servers[app]} pool")
    pools = [p for p in diag["pools"] if p["from_tier"] == app and p["to_tier"] == db]
    check(len(pools) == 1, f"one pool entry {app} -> {db}: {len(pools)}")
    if pools:
        p = pools[0]
        check(p["connections_seen"] == counts["jdbc_connections"] == 2,
              f"connections {p['connections_seen']} == the webapp's {counts['jdbc_connections']} == 2")
        check(p["recommended"] > 2, f"recommended {p['recommended']} > 2")
    pct = round(v["share"] * 100)
    check(v["share"] >= 0.5, f"share of the front tier's congested time {v['share']:.2f} >= 0.5")
    check(f"busy in {pct}% of" in v["evidence"], f"the evidence quotes the share ({pct}%)")
elif cause == "dbcpu":
    check((v["tier"], v["server"], v["cause"]) == (db, servers[db], "cpu"),
          f"verdict {v['tier']} {v['server']} {v['cause']} == {db} {servers[db]} cpu")
    # The witness: the cgroup's cpu.max as stack.sh wrote it.
    m = re.search(r"database CPU capped .*?: (\d+) us every (\d+) us", open(os.path.join(out, "dbcpu.log")).read())
    check(m is not None, "the run's log names the cgroup's quota and period")
    if m:
        period_ns = int(m.group(2)) * 1000
        got = v.get("cpu_quota_period_ns") or 0
        check(abs(got - period_ns) <= 0.02 * period_ns,
              f"quota period {got / 1e6:.2f} ms within 2% of cpu.max's {period_ns / 1e6:.0f} ms")
elif cause == "threads":
    check((v["tier"], v["server"], v["cause"]) == (app, servers[app], "threads"),
          f"verdict {v['tier']} {v['server']} {v['cause']} == {app} {servers[app]} threads")
    # Witnesses from Tomcat itself: the cap as configured, and the webapp's
    # own peak of requests running at once (each holds a connector thread).
    cap, busy = counts["tomcat_max_threads"], counts["tomcat_busy_max"]
    check(cap == 2, f"server.xml's maxThreads {cap} == 2")
    check(busy == cap, f"the webapp ran at most {busy} requests at once == maxThreads {cap}")
    # nginx's clock: requests in flight at Tomcat (sent .. answered) at once.
    ev = []
    for l in open(os.path.join(d, "timing.log")):
        f = l.split()
        if len(f) == 3 and f[1] != "-":
            end = round(float(f[0]) * 1000)
            up = round(float(f[1].split(",")[-1]) * 1000)
            ev += [(end - up, 1), (end, -1)]
    ev.sort()
    inflight = peak = 0
    for _, step in ev:
        inflight += step
        peak = max(peak, inflight)
    check(peak >= 2 * cap, f"nginx saw {peak} requests at Tomcat at once >= 2 x {cap}: they queued")
    check(counts["app_errors"] == 0 and counts["nginx_requests"] == counts["tomcat_requests"],
          f"none failed: webapp errors {counts['app_errors']}, nginx {counts['nginx_requests']} "
          f"== webapp {counts['tomcat_requests']}")
    cpu = cpu_shares()
    check(cpu.get("app", 1.0) < 0.5, f"Tomcat's CPU {cpu.get('app')} of one core < 0.5")
elif cause == "none":
    check(v["cause"] == "none", f"verdict cause {v['cause']} == none ({v['evidence']})")
    # Witnesses apart from the capture that the stack stalled: wrk's slowest
    # request (wrk.txt), and nginx's own clock for each request to Tomcat
    # (timing.log: when it ended, how long Tomcat took). A light load still
    # meets a stalled server when the machine stalls it (load average 12-15
    # on 2 cores: wrk's slowest 107-248 ms against a 12-17 ms mean, nginx
    # 222 ms for Tomcat against an 11-13 ms median; no GC; quiet runs: wrk's
    # slowest 22-25 ms), and the own-work stall rule (report.md "Stalls")
    # then rightly reports a freeze. So: when wrk saw no request of 50 ms or
    # more, no freeze episode and no episode diagnose roots at all; else each
    # must be no longer than wrk's slowest request plus two windows, and one
    # of Tomcat's must lie on a response of Tomcat's that nginx timed at 50 ms
    # or more.
    m = re.search(r"Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\b", open(os.path.join(d, "wrk.txt")).read())
    wrk_max = float(m.group(1)) * {"us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)] if m else 0.0
    slow = []
    for l in open(os.path.join(d, "timing.log")):
        f = l.split()
        if len(f) == 3 and f[1] != "-":
            end = round(float(f[0]) * 1000) * 10**6
            up = round(float(f[1].split(",")[-1]) * 1000) * 10**6
            if up >= 50 * 10**6:
                slow.append((end - up, end))
    def witnessed(e, tier):
        # An episode may reach a window past the stall on either side.
        if wrk_max < 50e6 or e["end_ns"] - e["start_ns"] > wrk_max + 100e6:
            return False
        return tier != names["app"] or any(a < e["end_ns"] and e["start_ns"] < b for a, b in slow)
    print(f"   wrk's slowest request {wrk_max / 1e6:.1f} ms; nginx timed {len(slow)} responses of "
          f"Tomcat at 50 ms or more" + (f" (longest {max(b - a for a, b in slow) / 1e6:.0f} ms)" if slow else ""))
    bad = [e for e in diag["episodes"] if not witnessed(e, e["tier"])]
    check(not bad, f"diagnose lists {len(diag['episodes'])} episodes with a root, "
          f"{len(bad)} not on a stall wrk or nginx saw (0)")
    # Its reason agrees with the report: a front tier without a congestion point
    # (front_congestion slow) is not said to be congested or above an N*.
    check(v["front_congestion"] != "slow" or
          ("N*" not in v["evidence"] and "was congested" not in v["evidence"]),
          f"front_congestion {v['front_congestion']}: the reason cites no N* or congestion")
    for role in ("web", "app", "db"):
        tier = names[role]
        r = json.load(open(os.path.join(d, f"report-{tier}.json")))
        eps = list(r["episodes"]) + [e for s in r["servers"] for e in s["episodes"]]
        freezes = [e for e in eps if e.get("kind") == "freeze"]
        print(f"   {tier}: n_star_status {r['n_star_status']}, congested {r['congested_fraction']:.4f}, "
              f"{len(eps)} episodes: {r['n_star_reason']}")
        bad = [e for e in freezes if not witnessed(e, tier)]
        check(not bad, f"{tier}: {len(freezes)} freeze episodes, {len(bad)} not on a stall "
              f"wrk or nginx saw (0)")
        check(r["congested_fraction"] <= 0.01, f"{tier}: congested {r['congested_fraction']:.2%} <= 1%")
    # The witness that nothing was near its capacity: CPU per tier from /proc.
    cpu = cpu_shares()
    check(sorted(cpu) == ["app", "db", "web"], f"cpu.txt has each tier's CPU: {cpu}")
    for role, share in sorted(cpu.items()):
        check(share < 0.25, f"{role}'s CPU {share:.3f} of one core < 0.25")
    check(counts["app_errors"] == 0, f"the webapp's errors {counts['app_errors']} == 0")
sys.exit(1 if failed else 0)
PY
done
[ "$failed" = 0 ] || exit 1
ok=1
echo "e2e_stack_causes: ok"
