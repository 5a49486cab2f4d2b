#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# diagnose_sweep.sh — `tbneck diagnose` over SEEDS seeds of each simulated cause
# (sim/examples/cause-*.conf when present, else tests/e2e/lib/diag/*.conf:
# db-cpu, app-cpu, pool, threads, gc on one of two app servers, speed, none),
# each run scored by tests/e2e/lib/diag_check.py against the simulator's
# expected verdict and truth. Prints one line per run and the tally; exit 1
# when fewer than 95% of the verdicts are right.
#   bench/diagnose_sweep.sh [BUILD_DIR] [SEEDS] [DURATION]
# (defaults build, 5, the configuration's own duration; DIAG_CONFS=test picks
# the test's configurations, 15 s unless DURATION says otherwise)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build}
seeds=${2:-5}
dur=${3:-15s}
tb=${TBNECK:-$build/tbneck}
sim=${TBNECK_SIM:-$build/sim/tbneck-sim}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ok=0
n=0
# The simulator's cause configurations (sim/examples/cause-*.conf, whose
# [expect] the simulator writes as PREFIX.verdict.csv) when this tree has them,
# else the test's own (tests/e2e/lib/diag/*.conf).
if [ -f "$src/sim/examples/cause-pool.conf" ] && [ "${DIAG_CONFS:-sim}" = sim ]; then
    confs=(db-cpu app-cpu pool threads gc speed none)
    path() { echo "$src/sim/examples/cause-$1.conf"; }
    durarg=()
    [ -n "${3:-}" ] && durarg=(--duration "$dur")
else
    confs=(db-cpu app-cpu db-pool app-threads gc-one db-speed none)
    path() { echo "$src/tests/e2e/lib/diag/$1.conf"; }
    durarg=(--duration "$dur")
fi
for conf in "${confs[@]}"; do
    for seed in $(seq 1 "$seeds"); do
        p="$work/$conf-$seed"
        "$sim" "$(path "$conf")" --out "$p" --seed "$seed" "${durarg[@]}" -q
        "$tb" capture -q -r "$p.pcap" --db "$p.db"
        "$tb" diagnose --db "$p.db" --format json >"$p.json"
        extra=()
        if [ "$conf" = db-pool ] || [ "$conf" = pool ]; then
            tshark -r "$p.pcap" -T fields -E separator=, -e tcp.stream -e ip.src -e tcp.srcport \
                -e ip.dst -e tcp.dstport 2>/dev/null >"$p.streams.csv"
            extra=("$p.streams.csv")
        fi
        n=$((n + 1))
        if python3 "$src/tests/e2e/lib/diag_check.py" "$conf" "$p.json" "$p" "${extra[@]}"; then
            ok=$((ok + 1))
        fi
        rm -f "$p.pcap" "$p".db*
    done
done
each=${durarg[1]:-its own duration}
echo "diagnose sweep: $ok/$n verdicts right ($(( 100 * ok / n ))%), $seeds seeds x 7 causes, $each each"
[ $((100 * ok)) -ge $((95 * n)) ]
