#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# whatif_sweep.sh — `tbneck whatif` against re-runs of the simulator with the
# change made (same seed, streams = per-user: the same users, pages and
# demands), four cases x SEEDS: the database 2x faster (cause-db-cpu), the
# application CPUs 2x faster (cause-app-cpu, app-bound), the pool 2 -> 8
# (cause-pool), one more database core (cause-db-cpu, 2 -> 3). Prints a table
# (mean and p95 of the front tier: base, re-run, forecast, error) and a count
# of cases within 15% (mean) and 25% (p95).
# usage: bench/whatif_sweep.sh [BUILD_DIR] [SEEDS...]   (default seeds 1-5)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
shift || true
seeds=${*:-1 2 3 4 5}
sim=$build/sim/tbneck-sim
tb=$build/tbneck
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0 total=0
run() { # run NAME CONF SET TIER OPTION VALUE SEED
    local name=$1 conf=$2 set=$3 tier=$4 opt=$5 val=$6 seed=$7
    local b=$work/$name.$seed
    "$sim" "$src/sim/examples/$conf" --out "$b.base" --seed "$seed" -q
    "$sim" "$src/sim/examples/$conf" --out "$b.rerun" --seed "$seed" --set "$set" -q
    "$tb" capture -q -r "$b.base.pcap" --db "$b.db"
    "$tb" whatif --tier "$tier" "--$opt" "$val" --format json --db "$b.db" >"$b.json"
    total=$((total + 1))
    if python3 "$src/tests/e2e/lib/whatif_check.py" "$b.json" "$b.base.requests.csv" \
        "$b.rerun.requests.csv" "$name seed $seed"; then
        pass=$((pass + 1))
    fi
    rm -f "$b".*.pcap "$b.db"
}
start=$(date +%s)
for seed in $seeds; do
    run db-speedup-2 cause-db-cpu.conf tier.db.speedup=2 mysql speedup 2 "$seed"
    run app-speedup-2 cause-app-cpu.conf tier.app.speedup=2 http-8080 speedup 2 "$seed"
    run pool-2-to-8 cause-pool.conf tier.app.pool=8 http-8080 pool 8 "$seed"
    run db-cores-3 cause-db-cpu.conf tier.db.cores=3 mysql cores 3 "$seed"
done
echo "whatif_sweep: $pass of $total cases within 15% (mean) and 25% (p95) of the re-run;" \
    "$(($(date +%s) - start)) s"
