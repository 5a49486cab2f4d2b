#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_heldout.sh — `tbneck diagnose` on shapes its rules were not tuned
# on: bench/diagnose_sweep.sh's causes varied with `tbneck-sim --set` (other
# demand distributions, queries per page, cores, thread caps, speed levels,
# loads), each with the verdict its configuration is built to show written
# by the simulator from [expect] (PREFIX.verdict.csv) and scored by
# tests/e2e/lib/diag_check.py against it and the truth files. Seeds 21..
# (the tuned sweep uses 1..5). Prints one line per run, a tally per variant
# and overall; exit 1 when fewer than 90% of the verdicts are right.
#   bench/diagnose_heldout.sh [BUILD_DIR] [SEEDS] [VARIANT_REGEX]
# (defaults build, 4, every variant). SEEDS: a count N (seeds 21..20+N) or a
# range A-B (seeds A..B; the second held-out set is 31-38). Each run's line
# ends with diagnose's speed figures for the root server(s) (isolated-speed
# F and effect, log-rank z and effect, capacity gain, service spread, levels;
# TBNECK_DIAGNOSE_DEBUG=1). Measured: docs/diagnose.md "held-out".
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
seeds=${2:-4}
only=${3:-.}
tb=${TBNECK:-$build/tbneck}
sim=${TBNECK_SIM:-$build/sim/tbneck-sim}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ex=$src/sim/examples
# bench/nstar/app.conf states no [expect]: a copy with the one it is built
# to show (the application tier's CPUs, both servers).
appconf=$work/app-cpu.conf
{ cat "$src/bench/nstar/app.conf"; printf '\n[expect]\nserver = app\ncause = cpu\n'; } >"$appconf"
# app.conf's 300 users congest the application tier for a few hundred
# milliseconds in some seeds only: 380 users over 15 s make every seed a case.
appload="--set sim.users=380 --set sim.duration=15s"
# name | configuration | its --set overrides (the verdict: [expect], or set here)
variants=(
    # CPU-bound application tier: bench/nstar/app.conf's shape (2 servers,
    # bursty users, threads and pools never hit), demand scaled with cores.
    "app-exp|$appconf|$appload"
    "app-const|$appconf|$appload --set class.ViewStory.demand.app=const(4ms)"
    "app-const-q1|$appconf|$appload --set class.ViewStory.demand.app=const(4ms) --set class.ViewStory.queries=1"
    "app-lognorm-q1-c4|$appconf|$appload --set tier.app.cores=4 --set class.ViewStory.demand.app=lognormal(8ms,0.5) --set class.ViewStory.queries=1"
    "app-uniform-q2-c3|$appconf|$appload --set tier.app.cores=3 --set class.ViewStory.demand.app=uniform(3ms,9ms) --set class.ViewStory.queries=2"
    "app-const-q4-c4|$appconf|$appload --set tier.app.cores=4 --set class.ViewStory.demand.app=const(8ms) --set class.ViewStory.queries=4"
    # Thread-capped application tier: cause-threads.conf (6 threads on 8 cores).
    "thr-exp-t4|$ex/cause-threads.conf|--set tier.app.threads=4 --set class.ViewStory.demand.app=exp(6ms)"
    "thr-const|$ex/cause-threads.conf|--set class.ViewStory.demand.app=const(8ms)"
    "thr-const-t4-q2|$ex/cause-threads.conf|--set tier.app.threads=4 --set class.ViewStory.demand.app=const(6ms) --set class.ViewStory.queries=2"
    "thr-lognorm|$ex/cause-threads.conf|--set class.ViewStory.demand.app=lognormal(8ms,0.5)"
    # CPU changing speed: cause-speed.conf (database, 4 cores, 1 ms queries).
    "speed-2lvl|$ex/cause-speed.conf|--set tier.db.speeds=0.5,1.0 --set tier.db.speed_init=1"
    "speed-4lvl|$ex/cause-speed.conf|--set tier.db.speeds=0.4,0.6,0.8,1.0 --set tier.db.speed_init=3 --set tier.db.speed_every=uniform(1s,4s)"
    "speed-exp|$ex/cause-speed.conf|--set class.ViewStory.demand.db=exp(1ms)"
    # The false-positive guard of the speed rules: fixed-speed CPUs with
    # exponential demands must read cpu (cause-db-cpu.conf as it is, and
    # cause-speed.conf's database held at one speed; 0.6 and 0.6001 are one
    # speed to 0.02%, the simulator wanting two levels to switch between).
    "db-cpu-exp|$ex/cause-db-cpu.conf|"
    "fixed-exp-060|$ex/cause-speed.conf|--set class.ViewStory.demand.db=exp(1ms) --set tier.db.speeds=0.6,0.6001 --set tier.db.speed_init=0 --set expect.cause=cpu"
    "fixed-exp-055|$ex/cause-speed.conf|--set class.ViewStory.demand.db=exp(1ms) --set tier.db.speeds=0.55,0.5501 --set tier.db.speed_init=0 --set expect.cause=cpu"
    # Nothing wrong: cause-none.conf at more users.
    "none-160|$ex/cause-none.conf|--set sim.users=160"
)
if [[ $seeds =~ ^([0-9]+)-([0-9]+)$ ]]; then
    mapfile -t seedlist < <(seq "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
elif [[ $seeds =~ ^[0-9]+$ ]]; then
    mapfile -t seedlist < <(seq 21 $((20 + seeds)))
else
    echo "diagnose_heldout.sh: SEEDS is a count or a range A-B, not '$seeds'" >&2
    exit 2
fi
declare -A vok vn
ok=0
n=0
for v in "${variants[@]}"; do
    IFS='|' read -r name conf sets <<<"$v"
    [[ $name =~ $only ]] || continue
    read -ra setargs <<<"$sets"
    for seed in "${seedlist[@]}"; do
        p="$work/$name-$seed"
        if ! "$sim" "$conf" --out "$p" --seed "$seed" -q "${setargs[@]}"; then
            echo "$name seed $seed: the simulator failed"
            exit 2
        fi
        "$tb" capture -q -r "$p.pcap" --db "$p.db"
        TBNECK_DIAGNOSE_DEBUG=1 "$tb" diagnose --db "$p.db" --no-critical-path --format json \
            >"$p.json" 2>"$p.err"
        want=none
        [ -f "$p.verdict.csv" ] && want=$(tail -n +2 "$p.verdict.csv" | cut -d, -f3)
        [ -n "$want" ] || want=none
        n=$((n + 1))
        vn[$name]=$((${vn[$name]:-0} + 1))
        line=$(python3 "$src/tests/e2e/lib/diag_check.py" "$want" "$p.json" "$p")
        rc=$?
        if [ $rc -eq 0 ]; then
            ok=$((ok + 1))
            vok[$name]=$((${vok[$name]:-0} + 1))
        fi
        echo "$name seed $seed: $line $(tr '\n' ' ' <"$p.err")"
        rm -f "$p".*
    done
done
echo "per variant:"
for v in "${variants[@]}"; do
    name=${v%%|*}
    [ -n "${vn[$name]:-}" ] && printf '  %-20s %d/%d\n' "$name" "${vok[$name]:-0}" "${vn[$name]}"
done
echo "diagnose held-out: $ok/$n verdicts right ($((100 * ok / (n ? n : 1)))%), seeds ${seedlist[0]}-${seedlist[-1]}"
[ $((100 * ok)) -ge $((90 * n)) ]
