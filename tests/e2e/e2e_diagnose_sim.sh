#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_diagnose_sim.sh — `tbneck diagnose` on one short simulated run of each
# cause (tests/e2e/lib/diag/*.conf), each scored against the cause the run was
# built with and the simulator's truth (diag_check.py: verdict, freezes >= 100 ms
# attributed to the frozen server, pool connections equal to tshark's streams);
# the layered load against an independent computation from the truth and
# Little's law per window (layer_oracle.py); a CPU changing speed under
# exponential demands against one of fixed speed; the plots; and bad input: a
# database with no request, one tier only, no callers, a configured tier that
# never answered, bad options. The full sweep (5 seeds each) is
# bench/diagnose_sweep.sh.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
lib="$TB_SRCDIR/tests/e2e/lib"
fail=0

run() { # run CAUSE -> $work/CAUSE.{pcap,db,json}
    local c=$1 p="$work/$1" dur=8s
    # A CPU changing speed needs time for its governor to go through levels.
    [ "$c" = db-speed ] && dur=15s
    "$TBNECK_SIM" "$lib/diag/$c.conf" --out "$p" --seed 3 --duration "$dur" -q
    "$TBNECK" capture -q -r "$p.pcap" --db "$p.db"
    "$TBNECK" diagnose --db "$p.db" --format json >"$p.json"
}

for c in db-cpu app-cpu app-cpu-const db-pool app-threads gc-one db-speed none; do
    run "$c"
    extra=()
    if [ "$c" = db-pool ]; then
        tshark -r "$work/$c.pcap" -T fields -E separator=, -e tcp.stream -e ip.src \
            -e tcp.srcport -e ip.dst -e tcp.dstport 2>/dev/null >"$work/$c.streams.csv"
        extra=("$work/$c.streams.csv")
    fi
    python3 "$lib/diag_check.py" "$c" "$work/$c.json" "$work/$c" "${extra[@]}" || fail=1
done

# A CPU changing speed (1.0/0.7/0.45) with exponential query demands, and
# the same database held at one speed (0.6; 0.6001 only because the
# simulator wants two levels to switch between): speed and cpu, each against
# the configuration's [expect] and the truth (sim/examples/cause-speed.conf,
# 20 s, ~3 s each). The isolated-speed F test reads 1-2 on the first (the
# requests a busy slow CPU serves alone are its short ones); the log-rank
# test on the requests that arrived at an empty server, censored at the next
# arrival, tells them apart (docs/diagnose.md "speed").
for c in speed-exp fixed-exp; do
    p="$work/$c"
    sets=(--set 'class.ViewStory.demand.db=exp(1ms)')
    [ "$c" = fixed-exp ] && sets+=(--set tier.db.speeds=0.6,0.6001 --set tier.db.speed_init=0
        --set expect.cause=cpu)
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/cause-speed.conf" --out "$p" --seed 3 -q "${sets[@]}"
    "$TBNECK" capture -q -r "$p.pcap" --db "$p.db"
    "$TBNECK" diagnose --db "$p.db" --format json >"$p.json"
    python3 "$lib/diag_check.py" "$c" "$p.json" "$p" || fail=1
    rm -f "$p.pcap"
done

# app-cpu-const's expected verdict (its [expect], cpu) against the simulator's
# truth: what limited the application servers was their CPUs, never their
# threads, and they were limited for a while.
python3 - "$work/app-cpu-const.causes.csv" <<'PY' || fail=1
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["tier"] == "http-8080"]
causes = {r["cause"] for r in rows}
t = sum(int(r["end_ns"]) - int(r["start_ns"]) for r in rows if r["cause"] == "cpu") / 1e9
ok = causes == {"cpu"} and t > 0.5
print(f"app-cpu-const truth: {'ok' if ok else 'FAIL'}: app causes {sorted(causes)}, cpu {t:.2f} s")
sys.exit(0 if ok else 1)
PY

# The layered load, per window, against the truth; Little's law along the path.
"$TBNECK" diagnose --db "$work/db-cpu.db" --format csv >"$work/db-cpu.csv"
python3 "$lib/layer_oracle.py" "$work/db-cpu.requests.csv" "$work/db-cpu.csv" || fail=1

# Text: the verdict first, as a sentence naming the root and the cause.
"$TBNECK" diagnose --db "$work/db-pool.db" >"$work/db-pool.txt"
head -1 "$work/db-pool.txt" | grep -q '^verdict: every server of http-8080 has all of its 2 connections to mysql busy' ||
    { echo "FAIL: text verdict: $(head -1 "$work/db-pool.txt")"; fail=1; }
# report's cross-tier line is the diagnose verdict.
"$TBNECK" report --tier mysql --db "$work/db-cpu.db" >"$work/report.txt"
grep -q '^-> root cause (tbneck diagnose): mysql 10.0.4.1:3306 is CPU-saturated' "$work/report.txt" ||
    { echo "FAIL: report's verdict line: $(grep -- '^->' "$work/report.txt")"; fail=1; }

# Plots: the stacked layers and the wait-for graph, PNG and SVG.
"$TBNECK" diagnose --db "$work/gc-one.db" --plot "$work/d.png" >/dev/null
"$TBNECK" diagnose --db "$work/gc-one.db" --plot "$work/d.svg" >/dev/null
for f in d.png d-graph.png; do
    [ "$(head -c 4 "$work/$f" | od -An -tx1 | tr -d ' ')" = 89504e47 ] ||
        { echo "FAIL: $f is not a PNG"; fail=1; }
done
grep -q '<svg' "$work/d.svg" && grep -q 'ROOT: freeze' "$work/d-graph.svg" ||
    { echo "FAIL: SVG plots (layers, or the graph's root)"; fail=1; }

# Bad input: verdict none with the reason, never a crash or a guess (the
# report's episodes, if any, are listed without a root).
expect_none() { # NAME DB REASON_REGEX [diagnose args]
    local name=$1 db=$2 re=$3
    shift 3
    if ! "$TBNECK" diagnose --db "$db" --format json "$@" >"$work/$name.json" 2>"$work/$name.err"; then
        echo "FAIL: $name: exit $? ($(cat "$work/$name.err"))"
        fail=1
        return
    fi
    python3 - "$work/$name.json" "$re" "$name" <<'PY' || fail=1
import json, re, sys
d = json.load(open(sys.argv[1]))
v = d["verdict"]
ok = v["cause"] == "none" and re.search(sys.argv[2], v["evidence"]) and \
    all(e["cause"] == "none" and e["root_tier"] == "" for e in d["episodes"])
print(f"{sys.argv[3]}: {'ok' if ok else 'FAIL'}: {v['cause']}: {v['evidence']}")
sys.exit(0 if ok else 1)
PY
}
# No requests at all (a capture of nothing).
"$TBNECK" capture -q -r "$work/db-cpu.pcap" --db "$work/empty.db" 'port 9'
expect_none empty "$work/empty.db" 'no requests'
# One tier only: the front tier's traffic alone.
"$TBNECK" capture -q -r "$work/db-cpu.pcap" --db "$work/one.db" 'port 80'
expect_none one-tier "$work/one.db" 'only one tier'
# No callers: the front and the database, without the tier between them.
"$TBNECK" capture -q -r "$work/db-cpu.pcap" --db "$work/nocall.db" 'port 80 or port 3306'
expect_none no-callers "$work/nocall.db" 'no tier calls another'
# A configured tier that never answered is left out, the rest diagnosed.
printf 'web http 10.0.2.1:80\napp http 10.0.3.1:8080,10.0.3.2:8080\ndb mysql 10.0.4.1:3306\nidle generic 10.9.9.9:7000\n' >"$work/tiers"
"$TBNECK" capture -q -r "$work/db-cpu.pcap" --db "$work/tiers.db" --tiers "$work/tiers"
"$TBNECK" diagnose --db "$work/tiers.db" --format json >"$work/tiers.json"
python3 - "$work/tiers.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
v = d["verdict"]
ok = (v["tier"], v["cause"]) == ("db", "cpu") and d["front_tier"] == "web" and \
    "idle" not in {t["tier"] for t in d["tiers"]}
print(f"tiers file: {'ok' if ok else 'FAIL'}: {v['tier']} {v['cause']} front {d['front_tier']}")
sys.exit(0 if ok else 1)
PY

# Usage errors exit 2, runtime errors 1, one line each.
expect_exit() { # STATUS REGEX args...
    local st=$1 re=$2 rc=0
    shift 2
    "$TBNECK" "$@" >/dev/null 2>"$work/err" || rc=$?
    if [ "$rc" -ne "$st" ] || [ "$(wc -l <"$work/err")" -ne 1 ] || ! grep -Eq "$re" "$work/err"; then
        echo "FAIL: tbneck $*: exit $rc, stderr: $(cat "$work/err")"
        fail=1
    fi
}
expect_exit 2 "format 'xml'" diagnose --db "$work/db-cpu.db" --format xml
expect_exit 2 "window '0'" diagnose --db "$work/db-cpu.db" --window 0
expect_exit 2 "png or .svg" diagnose --db "$work/db-cpu.db" --plot x.gif
expect_exit 2 "unknown option" diagnose --db "$work/db-cpu.db" --tier mysql
expect_exit 1 "nosuch.db" diagnose --db "$work/nosuch.db"
exit $fail
