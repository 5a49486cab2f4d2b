#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh — the main job on a fresh Debian 12 machine: installs what tbneck
# needs, builds it into ./build, simulates a 1/2/1 web → app → database stack
# whose application servers pause for garbage collection (sim/examples/gc.conf),
# captures the simulated tap with tbneck, reports the application and
# database tiers and diagnoses the stack (root server and cause), with plots
# in ./demo-out/. Finally it checks the report
# against the simulator's ground truth (the freezes it injected).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=$root/demo-out
t0=$(date +%s)

step() { printf '\n==> %s\n' "$*"; }

step "dependencies (scripts/deps.sh --demo)"
bash scripts/deps.sh --demo

# TB_DEMO_BUILD picks another build directory (default ./build, reused if present).
build=${TB_DEMO_BUILD:-build}
step "build (meson + ninja into ./$build)"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" >/dev/null
fi
ninja -C "$build" tbneck sim/tbneck-sim >/dev/null
tbneck=$root/$build/tbneck
sim=$root/$build/sim/tbneck-sim

rm -rf "$out"
mkdir -p "$out"

step "simulate 30 s of a 1/2/1 stack with GC pauses on the app tier"
"$sim" sim/examples/gc.conf --out "$out/sim"
nfreezes=$(($(wc -l <"$out/sim.freezes.csv") - 1))
echo "ground truth: $out/sim.requests.csv, $out/sim.freezes.csv ($nfreezes freezes)"

step "tbneck capture -r demo-out/sim.pcap --db demo-out/tbneck.db"
"$tbneck" capture -r "$out/sim.pcap" --db "$out/tbneck.db"

step "tbneck tiers"
"$tbneck" tiers --db "$out/tbneck.db"

step "tbneck report --tier http-8080 --window 50ms --plot demo-out/app.png"
"$tbneck" report --tier http-8080 --window 50ms --db "$out/tbneck.db" --plot "$out/app.png"

step "tbneck report --tier mysql --window 50ms --plot demo-out/db.png"
"$tbneck" report --tier mysql --window 50ms --db "$out/tbneck.db" --plot "$out/db.png"

step "tbneck diagnose --plot demo-out/diagnose.png (why: the root server and cause)"
"$tbneck" diagnose --window 50ms --db "$out/tbneck.db" --plot "$out/diagnose.png"

step "ground truth: did each injected GC pause fall inside a congestion episode of its server?"
found=0
frozen=0
total=0
tail -n +2 "$out/sim.freezes.csv" | cut -d, -f1 | sort -u >"$out/frozen-servers.txt"
while read -r server; do
    "$tbneck" report --tier http-8080 --server "$server" --window 50ms --db "$out/tbneck.db" \
        --format csv >"$out/episodes-$server.csv"
    # Columns: tier,server,start_ns,end_ns,duration_ns,peak_load,mean_load,throughput,kind
    read -r f z n < <(awk -F, -v s="$server" '
        FNR == 1 { next }
        FILENAME ~ /episodes/ { es[++ne] = $3; ee[ne] = $4; ek[ne] = $9; next }
        $1 == s {
            total++
            hit = 0; fz = 0
            for (i = 1; i <= ne; i++)
                if (es[i] < $3 && ee[i] > $2) { hit = 1; if (ek[i] == "freeze") fz = 1 }
            found += hit; frozen += fz
        }
        END { print found + 0, frozen + 0, total + 0 }' "$out/episodes-$server.csv" \
        "$out/sim.freezes.csv")
    echo "  $server: $f of $n pauses inside an episode ($z inside one of kind freeze)"
    found=$((found + f))
    frozen=$((frozen + z))
    total=$((total + n))
done <"$out/frozen-servers.txt"
echo "  all app servers: $found of $total injected pauses inside an episode, $frozen of kind freeze"

step "done in $(($(date +%s) - t0)) s"
echo "plots:  $out/app.png  $out/db.png  $out/diagnose.png  $out/diagnose-graph.png  $out/diagnose-path.png"
echo "data:   $out/tbneck.db (tbneck report/export --db $out/tbneck.db), truth in $out/sim.*.csv"
