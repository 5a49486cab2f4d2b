#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# e2e_whatif.sh — `tbneck whatif --format json` against the simulator re-run
# with the change made (same seed; streams = per-user replays the same users,
# pages and demands): the database 2x faster (cause-db-cpu) and the
# application tier's pool 2 -> 8 (cause-pool), seeds 1 and 2. The baseline
# must equal the base run's truth (front requests' mean, p50, p95, p99); the
# forecast mean within 15% and p95 within 25% of the re-run's truth
# (tests/e2e/lib/whatif_check.py; the five-seed sweep of four changes is
# bench/whatif_sweep.sh). The text output names the model and why.
set -euo pipefail
: "${TBNECK:?}" "${TBNECK_SIM:?}" "${TB_SRCDIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
run() { # run NAME CONF SET TIER OPTION VALUE SEED
    local name=$1 conf=$2 set=$3 tier=$4 opt=$5 val=$6 seed=$7
    local b=$work/$name.$seed
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/$conf" --out "$b.base" --seed "$seed" -q
    "$TBNECK_SIM" "$TB_SRCDIR/sim/examples/$conf" --out "$b.rerun" --seed "$seed" --set "$set" -q
    "$TBNECK" capture -q -r "$b.base.pcap" --db "$b.db"
    "$TBNECK" whatif --tier "$tier" "--$opt" "$val" --format json --db "$b.db" >"$b.json"
    python3 "$TB_SRCDIR/tests/e2e/lib/whatif_check.py" "$b.json" "$b.base.requests.csv" \
        "$b.rerun.requests.csv" "$name seed $seed" || fail=1
    "$TBNECK" whatif --tier "$tier" "--$opt" "$val" --db "$b.db" >"$b.txt"
    grep -q '^model: closed: [0-9]* idle gaps' "$b.txt" || { cat "$b.txt"; fail=1; }
    rm -f "$b".*.pcap
}
for seed in 1 2; do
    run db-speedup-2 cause-db-cpu.conf tier.db.speedup=2 mysql speedup 2 "$seed"
    run pool-2-to-8 cause-pool.conf tier.app.pool=8 http-8080 pool 8 "$seed"
done
exit $fail
