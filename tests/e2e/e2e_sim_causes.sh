#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_sim_causes.sh — each sim/examples/cause-*.conf produces, by the
# simulator's own truth, the diagnosis its [expect] section states: the cause
# labels (PREFIX.causes.csv) show the expected cause on the expected servers
# for at least 5% of the run, three times any other label, and none of the
# labels the configuration leaves no room for (no pool waits outside the pool
# case, no thread waits outside the threads case, ...); freezes 100-300 ms on
# the frozen server only; three speeds; the pool case's connections exactly the
# configured pool per caller server; the no-bottleneck case nearly unlabelled.
# linking.conf keeps at least 50 requests in flight at the application tier.
# Each on its own seed and on seed 1 (tests/e2e/lib/sim_causes.py has the rules).
set -euo pipefail
: "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ex="$TB_SRCDIR/sim/examples"
chk="$TB_SRCDIR/tests/e2e/lib/sim_causes.py"
fail=0
n=0
for conf in "$ex"/cause-*.conf "$ex/linking.conf"; do
    name=$(basename "$conf" .conf)
    extra=()
    [ "$name" = linking ] && extra=(--min-app-load 50)
    for seed in "" 1; do
        echo "== $name ${seed:+seed $seed}"
        "$TBNECK_SIM" "$conf" --out "$work/run" -q ${seed:+--seed "$seed"}
        python3 "$chk" "$work/run" "${extra[@]}" || fail=1
        n=$((n + 1))
    done
done
# Seven causes and the linking run, two seeds each.
[ "$n" -eq 16 ] || { echo "FAIL: $n runs, expected 16 (a cause-*.conf missing?)"; fail=1; }
[ "$fail" -eq 0 ] && echo "e2e_sim_causes: OK"
exit "$fail"
