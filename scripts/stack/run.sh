#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh — the one command that tries tbneck on a real stack: installs what it needs,
# starts nginx → Tomcat 10 → MariaDB with each tier at its own address, loads it with
# wrk while `tbneck capture` listens on the wire, imports Tomcat's GC log and writes
# the reports and plots to OUT (default ./stack-run). Everything it started is
# stopped and removed when it ends, also after a failure or Ctrl-C.
#
#   bash scripts/stack/run.sh [--out DIR] [--duration 30] [--connections 16] [--think 45]
#                             [--layout auto|netns|loopback] [--discover] [--pcap]
#                             [--cause gc|pool|dbcpu|threads|none] [--tbneck PATH] [--no-deps]
#                             [--quick]
#
# --discover   let tbneck discover the tiers (names http, http-8080, mysql) instead of
#              using the tiers file written for the stack (names web, tomcat, mysql)
# --pcap       capture with tcpdump -w and run `tbneck capture -r` on the file afterwards
#              instead of capturing live with `tbneck capture -i`
# --cause      the transient bottleneck to induce (docs/stack.md): gc (default) Tomcat's
#              stop-the-world collections; pool: the webapp's JDBC pool capped at 2
#              connections while MariaDB idles; dbcpu: MariaDB's CPU capped by a cgroup
#              quota at 30 ms of every 100 ms while every story query computes MD5 rounds;
#              threads: Tomcat's connector capped at 2 request threads (acceptCount 1000,
#              a JDBC pool of 10 kept open) while its requests mostly wait on MariaDB's
#              9 ms SLEEP, under 64 connections thinking 350 ms unless given: bursts
#              bring more requests to Tomcat than it has threads and the rest queue;
#              none: a healthy stack (no cap, no GC pressure) under a light load (8
#              connections, think 150 ms unless given), with each tier's CPU in cpu.txt
# --quick      after the capture only the counts and `tbneck diagnose` (text and JSON):
#              no reports, plots or GC events report
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$PWD/stack-run
duration=30
conns=""
think=""
warmup=6
layout=auto
discover=0
pcap=0
deps=1
quick=0
cause=gc
tbneck=${TBNECK:-}

usage() { sed -n '3,29p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
    --out) out=$2; shift ;;
    --duration) duration=$2; shift ;;
    --connections) conns=$2; shift ;;
    --think) think=$2; shift ;;
    --layout) layout=$2; shift ;;
    --discover) discover=1 ;;
    --pcap) pcap=1 ;;
    --cause) cause=$2; shift ;;
    --tbneck) tbneck=$2; shift ;;
    --no-deps) deps=0 ;;
    --quick) quick=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (network namespaces, packet capture)" >&2; exit 2; }
# Each cause changes only what it needs; Tomcat gets threads enough (64, more
# than wrk's connections) when the cause is elsewhere, so that its thread cap
# does not become a second ceiling.
case "$cause" in
gc) ;;
pool|dbcpu|threads|none)
    # A heap large enough that collections are rare and short: the cause
    # under test is then the only one.
    export STACK_HEAP=${STACK_HEAP:-"-Xms400m -Xmx400m -Xmn200m"} \
           STACK_ENTRIES_PER_REQUEST=${STACK_ENTRIES_PER_REQUEST:-0}
    ;;&
pool) export STACK_JDBC_POOL=${STACK_JDBC_POOL:-2} STACK_TOMCAT_THREADS=${STACK_TOMCAT_THREADS:-64} ;;
dbcpu) export STACK_DB_CPU=${STACK_DB_CPU:-30} STACK_DB_CPU_LOOPS=${STACK_DB_CPU_LOOPS:-1000} \
              STACK_DB_DELAY_US=${STACK_DB_DELAY_US:-0} STACK_TOMCAT_THREADS=${STACK_TOMCAT_THREADS:-64} ;;
# Tomcat's thread cap the only ceiling: the JDBC pool unbounded (it never needs
# more than the 3 threads' connections), no CPU cap, and requests that spend
# most of their life in MariaDB's SLEEP, so Tomcat's CPU is not what limits it.
# The pool keeps 10 connections open (HikariCP's default, minimumIdle =
# maximumPoolSize = 10): a pool that only ever opened the 3 the threads use
# would be all busy whenever the threads are, which the wire cannot tell from
# a pool of that size (docs/stack.md). Many users thinking long (64 x 350 ms,
# about 180 requests/s against the 2 threads' ~180/s) make bursts whose
# queues are long beside the cap: diagnose tells a thread cap by the queued
# requests not having begun, which shows only when the queue is several
# times the cap (docs/stack.md: 3 threads under 16 users read `cpu`).
threads) export STACK_TOMCAT_THREADS=${STACK_TOMCAT_THREADS:-2} \
                STACK_TOMCAT_ACCEPT=${STACK_TOMCAT_ACCEPT:-1000} \
                STACK_JDBC_MIN_IDLE=${STACK_JDBC_MIN_IDLE:-10}
         conns=${conns:-64} think=${think:-350} ;;
# Nothing wrong: the JDBC pool unbounded, Tomcat's 64 threads, no CPU cap, and a
# light load (docs/stack.md: why 8 users thinking 150 ms are far below capacity).
none) export STACK_TOMCAT_THREADS=${STACK_TOMCAT_THREADS:-64}
      conns=${conns:-8} think=${think:-150} ;;
*) echo "run.sh: unknown cause '$cause' (gc, pool, dbcpu, threads or none)" >&2; exit 2 ;;
esac
conns=${conns:-16} think=${think:-45}

say() { echo "== $*" >&2; }

if [ "$deps" = 1 ]; then
    say "installing packages (scripts/deps.sh --stack)"
    bash "$root/scripts/deps.sh" --stack
fi
if [ -z "$tbneck" ]; then
    if [ ! -f "$root/build/build.ninja" ]; then meson setup "$root/build" >/dev/null; fi
    ninja -C "$root/build" >/dev/null
    tbneck=$root/build/tbneck
fi
[ -x "$tbneck" ] || { echo "run.sh: $tbneck is not an executable" >&2; exit 1; }

# shellcheck source=stack.sh
source "$here/stack.sh"
if [ "$layout" = auto ]; then
    if stack_netns_ok; then layout=netns; else layout=loopback; fi
fi
stack_layout "$layout"

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/stack.db "$out"/stack.db-* "$out"/*.png "$out"/*.json "$out"/*.txt "$out"/*.log
work=$(mktemp -d /tmp/tbstack.XXXXXX)
cap_pid=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$cap_pid" ]; then
        kill -INT "$cap_pid" 2>/dev/null || true
        sleep 0.5
        kill -KILL "$cap_pid" 2>/dev/null || true
    fi
    stack_down
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "starting the stack ($layout layout) in $work"
stack_up "$work"

# Tiers file for the stack (used unless --discover): NAME PROTO SERVER [hosts=...].
cat >"$out/tiers.conf" <<EOF
web http $WEB_ADDR:80 hosts=$WEB_ADDR
tomcat http $APP_ADDR:8080 hosts=$APP_ADDR
mysql mysql $DB_ADDR:3306 hosts=$DB_ADDR
EOF

# Warm the JVM up (class loading, JIT) straight at Tomcat before the capture starts,
# then close the pool's database connections, so the captured run has no start-up
# stalls and every connection it sees starts with its handshake.
say "warm-up: ${warmup}s straight at Tomcat"
stack_load "http://$APP_ADDR:8080" "$warmup" "$conns" "$think" >"$out/wrk-warmup.txt"
stack_stats reset=1 >"$out/stats-before.txt"
# Read twice: the second reading tells what one reading adds to the counter.
echo "questions0 $(stack_db_questions)" >>"$out/stats-before.txt"
echo "questions $(stack_db_questions)" >>"$out/stats-before.txt"

capargs=(--db "$out/stack.db")
[ "$discover" = 1 ] || capargs+=(--tiers "$out/tiers.conf")
if [ "$pcap" = 1 ]; then
    say "capturing on $CAP_IFACE with tcpdump"
    tcpdump -i "$CAP_IFACE" -s 0 -B 65536 -U -w "$work/stack.pcap" "$CAP_FILTER" 2>"$out/capture.log" &
else
    say "capturing live on $CAP_IFACE: tbneck capture -i $CAP_IFACE"
    "${PRIO_PREFIX[@]}" "$tbneck" capture -i "$CAP_IFACE" "${capargs[@]}" -f "$CAP_FILTER" \
        --duration "$((duration + 60))s" >"$out/capture.log" 2>&1 &
fi
cap_pid=$!
# Both print their "listening" line once the capture is open; load before that
# would be partly missed and the request counts would not match.
ready="capturing on"
[ "$pcap" = 1 ] && ready="listening on"
for _ in $(seq 150); do
    grep -q "$ready" "$out/capture.log" 2>/dev/null && break
    kill -0 "$cap_pid" 2>/dev/null || break
    sleep 0.1
done
if ! grep -q "$ready" "$out/capture.log" 2>/dev/null; then
    cat "$out/capture.log" >&2
    echo "run.sh: the capture did not start" >&2
    exit 1
fi
sleep 0.5

say "load: wrk, $conns connections, think time ${think} ms, ${duration}s, through nginx"
for t in web app db; do echo "$t $(stack_cpu_ticks $t)"; done >"$work/cpu-before.txt"
stack_load "http://$WEB_ADDR" "$duration" "$conns" "$think" >"$out/wrk.txt"
for t in web app db; do echo "$t $(stack_cpu_ticks $t)"; done >"$work/cpu-after.txt"
cat "$out/wrk.txt" >&2
sleep 1
kill -INT "$cap_pid"
cap_rc=0
wait "$cap_pid" || cap_rc=$?
cap_pid=""
stack_stats >"$out/stats-after.txt"
echo "questions $(stack_db_questions)" >>"$out/stats-after.txt"
cp "$STACK_GC_LOG" "$out/gc.log"
cp "$STACK_ACCESS_LOG" "$out/access.log"
cp "$(dirname "$STACK_ACCESS_LOG")/timing.log" "$out/timing.log" 2>/dev/null || true
cp "$work/tomcat/logs/stdout.log" "$out/tomcat.log"
cp "$work/tomcat/conf/server.xml" "$out/server.xml"
if [ "$pcap" = 1 ]; then
    [ "$cap_rc" = 0 ] || { cat "$out/capture.log" >&2; echo "run.sh: tcpdump failed" >&2; exit 1; }
    "$tbneck" capture -r "$work/stack.pcap" "${capargs[@]}" >>"$out/capture.log" 2>&1 \
        || { cat "$out/capture.log" >&2; echo "run.sh: tbneck capture -r failed" >&2; exit 1; }
elif [ "$cap_rc" != 0 ]; then
    cat "$out/capture.log" >&2
    echo "run.sh: tbneck capture exited with status $cap_rc" >&2
    exit 1
fi
say "stopping the stack"
stack_down

# What the servers themselves counted during the captured run.
counter() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
delta() { echo $(( $(counter "$1" "$out/stats-after.txt") - $(counter "$1" "$out/stats-before.txt") )); }
{
    echo "nginx_requests $(grep -c . "$out/access.log" || true)"
    echo "tomcat_requests $(delta requests)"
    echo "jdbc_queries $(delta queries)"
    # The driver's own set-up statements of each new connection are in here; what
    # the last reading added to the counter is not.
    q0=$(counter questions0 "$out/stats-before.txt")
    q1=$(counter questions "$out/stats-before.txt")
    echo "mysql_questions $(( $(counter questions "$out/stats-after.txt") - q1 - (q1 - q0) ))"
    echo "jdbc_connections $(delta connections)"
    echo "app_errors $(delta errors)"
    # The most requests the webapp ran at once during the run (each holds a
    # Tomcat thread) and the connector's maxThreads as configured.
    echo "tomcat_busy_max $(counter busy_max "$out/stats-after.txt")"
    echo "tomcat_max_threads $(sed -n 's/.*port="8080".*maxThreads="\([0-9]*\)".*/\1/p' "$out/server.xml")"
} >"$out/counts.txt"
# How busy each tier was (CPU seconds of its processes over the load's --duration,
# which overstates the share: the load's idle tail is not counted) and the
# load's offered rate (users / think time) against what nginx served per second.
{
    hz=$(getconf CLK_TCK)
    paste -d " " "$work/cpu-before.txt" "$work/cpu-after.txt" | while read -r t a _ b; do
        awk -v t="$t" -v d=$((b - a)) -v hz="$hz" -v s="$duration" -v c="$(nproc)" \
            'BEGIN { printf "cpu_%s %.2f s, %.3f of one core (%d cores)\n", t, d / hz, d / hz / s, c }'
    done
    awk -v n="$(counter nginx_requests "$out/counts.txt")" -v u="$conns" -v z="$think" -v s="$duration" \
        'BEGIN { printf "rate offered %.1f/s (%d users / %d ms think), served %.1f/s\n", u * 1000 / z, u, z, n / s }'
    awk '$1 == "Latency" { print "wrk latency mean " $2 ", stdev " $3 ", max " $4 }' "$out/wrk.txt"
} >"$out/cpu.txt"

say "tiers"
"$tbneck" tiers --db "$out/stack.db" | tee "$out/tiers.txt" >&2
# Tier of each server, from the request export (a stable CSV interface).
"$tbneck" export requests --db "$out/stack.db" >"$work/requests.csv"
python3 - "$work/requests.csv" >"$out/tier-counts.txt" <<'PY'
import csv, sys, collections
n = collections.Counter()
for row in csv.DictReader(open(sys.argv[1], newline="")):
    n[(row["tier"], row["server"])] += 1
for (tier, server), c in sorted(n.items()):
    print(tier, server, c)
PY
tier_of() { awk -v s="$1" '$2 == s { print $1; exit }' "$out/tier-counts.txt"; }
web_tier=$(tier_of "$WEB_ADDR:80")
app_tier=$(tier_of "$APP_ADDR:8080")
db_tier=$(tier_of "$DB_ADDR:3306")
for t in web_tier app_tier db_tier; do
    [ -n "${!t}" ] || { cat "$out/tier-counts.txt" >&2; echo "run.sh: no requests captured for $t" >&2; exit 1; }
done
echo "web $web_tier" >"$out/tier-names.txt"
echo "app $app_tier" >>"$out/tier-names.txt"
echo "db $db_tier" >>"$out/tier-names.txt"

if [ "$quick" = 1 ]; then
    "$tbneck" diagnose --window 50ms --db "$out/stack.db" | tee "$out/diagnose.txt" >&2
    "$tbneck" diagnose --window 50ms --db "$out/stack.db" --format json >"$out/diagnose.json"
    say "done: $out (counts.txt, tier-counts.txt, diagnose.txt/json)"
    cat "$out/counts.txt" "$out/tier-counts.txt" "$out/cpu.txt" >&2
    exit 0
fi
say "GC pauses of Tomcat → tier '$app_tier'"
"$tbneck" events import --gc "$out/gc.log" --tier "$app_tier" --db "$out/stack.db" >&2
for t in "$web_tier" "$app_tier" "$db_tier"; do
    "$tbneck" report --tier "$t" --window 50ms --db "$out/stack.db" --plot "$out/report-$t.png" \
        >"$out/report-$t.txt"
    "$tbneck" report --tier "$t" --window 50ms --db "$out/stack.db" --format json >"$out/report-$t.json"
done
# The root cause: which tier (or pool) held the front tier up, and why.
"$tbneck" diagnose --window 50ms --db "$out/stack.db" --plot "$out/diagnose.png" \
    | tee "$out/diagnose.txt" >&2
"$tbneck" diagnose --window 50ms --db "$out/stack.db" --format json >"$out/diagnose.json"
"$tbneck" events report --tier "$app_tier" --window 50ms --db "$out/stack.db" \
    --plot "$out/gc-load.png" | tee "$out/events-report.txt"
"$tbneck" events report --tier "$app_tier" --window 50ms --db "$out/stack.db" --format json \
    >"$out/events-report.json"
# The paper's Figure 10a shows 12 seconds; so does this close-up (of a shorter
# run, all of it).
zoom_from=0
[ "$duration" -ge 24 ] && zoom_from=10
zoom_len=$(( duration < 12 ? duration : 12 ))
"$tbneck" events report --tier "$app_tier" --window 50ms --db "$out/stack.db" \
    --from "+${zoom_from}s" --to "+$((zoom_from + zoom_len))s" --plot "$out/gc-load-12s.png" >/dev/null

say "done: $out (counts.txt, cpu.txt, tiers.txt, report-*.txt/png, diagnose.txt/json/png, events-report.txt, gc-load*.png)"
cat "$out/counts.txt" "$out/tier-counts.txt" "$out/cpu.txt" >&2
